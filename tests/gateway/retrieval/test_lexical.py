"""Lexical rules of legacy retrieval (gateway/retrieval/legacy/lexical.py) and legacy scoring."""
from __future__ import annotations

from gateway.retrieval.legacy import lexical
from gateway.retrieval.legacy.search import relevance
from support.lessons import lesson


def syntax(query: str) -> str:
    return lexical.mediawiki_query(lexical.query_terms(query))


def test_korean_words_become_stem_prefixes():
    assert syntax("단편화") == "단편화*"
    assert syntax("단편화로") == "단편화*"
    assert syntax("메모리 할당이 실패했다") == "메모리* 할당* 실패*"
    assert syntax("GPU가") == "gpu*"          # the particle is glued to a Latin word
    assert syntax("단편화 때문에 어떻게 실패했나") == "단편화* 실패했나*"   # function words dropped
    assert lexical.korean_stem("결과") == "결과"  # one syllable would remain: keep the word


def test_other_words_stay_whole_and_operators_cannot_be_injected():
    assert syntax("The cache hit-ratio") == "cache hit ratio"
    assert syntax("drop*") == "drop*"
    assert syntax('intitle:foo -bar "x" prefix:Lesson:') == "intitle foo bar prefix lesson"
    assert syntax("   ") == ""
    assert syntax("ＦＵＬＬ　ｗｉｄｔｈ") == "full width"   # NFKC


def test_terms_are_bounded_and_deduplicated():
    terms = lexical.query_terms(" ".join(f"word{i} word{i}" for i in range(40)))
    assert len(terms) == 12
    assert len({t.text for t in terms}) == 12


def test_term_matching_uses_prefixes_only_for_prefix_terms():
    words = set(lexical.words("GPU 메모리 단편화로 할당 실패"))
    assert lexical.term_matches(lexical.QueryTerm("단편화", True), words)
    assert not lexical.term_matches(lexical.QueryTerm("단편화", False), words)
    assert lexical.term_matches(lexical.QueryTerm("gpu", False), words)


def test_features_ngrams_and_jaccard():
    a = lexical.features("메모리 단편화로 실패")
    assert {"메모리", "단편화", "단편", "편화", "단편화", "메모", "모리"} <= a
    b = lexical.features("단편화 때문에 메모리 부족")
    score = lexical.jaccard(a, b)
    assert 0 < score < 1
    assert lexical.jaccard(a, a) == 1.0
    assert lexical.jaccard(set(), set()) == 0.0
    shared = lexical.shared_terms(a, b)
    assert shared[0] in ("단편화", "메모리")
    assert "단편" not in shared  # contained in a longer shared term


def test_salient_terms_prefer_title_words():
    terms = lexical.salient_terms([("디스크 단편화", 3.0), ("캐시 캐시 캐시 설정", 1.0)], 2)
    assert [t.text for t in terms] == ["단편화", "디스크"]


def test_title_matches_outrank_body_matches():
    terms = lexical.query_terms("zebra")
    in_title = lesson("t", title="Zebra crossing")
    in_body = lesson("b", observation="zebra zebra zebra")
    assert relevance(terms, in_title.evolve(), 5) > relevance(terms, in_body, 0)
    assert relevance(terms, lesson("n"), 0) == 0.15  # only the backend rank contributes


def test_huge_words_never_become_search_terms():
    """A 20,000-character word (e.g. one Hangul syllable repeated) is not a search term: it
    made MediaWiki's full-text search time out for find_analogies."""
    from gateway.retrieval.legacy import lexical

    huge = "가" * 20000
    assert lexical.query_terms(f"{huge} 단편화") == lexical.query_terms("단편화")
    assert all(len(t.text) <= lexical.MAX_TERM_CHARS for t in lexical.query_terms_all(f"{huge} x{'y' * 100} 장애"))
    assert lexical.salient_terms([(huge + " 메모리 단편화", 1.0)])
