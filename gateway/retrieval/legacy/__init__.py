"""Legacy search over MediaWiki full text: query terms (lexical) and the search, listing and analogies (search)."""
