-- S3RM synced: 저장소에서 동기화하는 모듈입니다. 위키에서 고치지 말고 저장소의
-- sync/pages/values.lua 를 고친 뒤 `s3rm sync push` 하세요 (docs/browser.md#synced-pages).
--
-- Hands a Lesson template's parameters to Semantic MediaWiki as the values
-- agents read (docs/browser.md#values-in-smw).
--
-- The page codec (gateway/domain/codec.py) writes every value with character
-- references so the page shows it as text; SMW would store those references
-- literally. The Lesson templates call this module instead of #set and
-- #subobject directly; it resolves the references exactly as the codec's
-- decode_value does (named ones through Module:S3RM entities, generated from
-- the codec's table: a name with its ";" that MediaWiki's parser resolves)
-- and passes the result on as one argument per property, so nothing a value
-- holds is split, expanded or parsed on the way.
--
--   {{#invoke:S3RM values|set|<Property>=<mode>:<wikitext>|...}}
--   {{#invoke:S3RM values|subobject|<name>|<Property>=<mode>:<wikitext>|...}}
--   {{#invoke:S3RM values|show|<Property>=<mode>:<wikitext>|...}}
--
-- Modes (chosen per field by the generator from schema/lesson.toml):
--   text  free text: decoded; "&" is handed on as "&amp;" because SMW's SQL
--         store keeps the htmlspecialchars_decode of a Text value
--         (DIBlobHandler::getInsertValues), so the stored text is the value;
--   list  a comma list (+sep=,), handed on as written;
--   keep  enum, date and page values, handed on as written (MediaWiki's
--         title parser resolves references in page names itself).
-- Empty values are left out, as SMW leaves them out. "show" returns the
-- arguments the other two would pass, as inert JSON text (for checks).
local p = {}

local ENTITIES = mw.loadData( 'Module:S3RM entities' )

-- One reference body (between "&" and ";"), or nil to keep it literal. Same
-- forms as codec._ENTITY: 1-7 decimal digits, 1-6 hex digits, or a name (a
-- run of ASCII letters, digits and non-ASCII bytes) found in the table.
local function resolve( body )
	local cp
	if body:match( '^#%d+$' ) and #body <= 8 then
		cp = tonumber( body:sub( 2 ) )
	elseif body:match( '^#[xX]%x+$' ) and #body <= 8 then
		cp = tonumber( body:sub( 3 ), 16 )
	else
		return ENTITIES[body]
	end
	if cp > 0x10FFFF or ( cp >= 0xD800 and cp <= 0xDFFF ) then
		return nil
	end
	return mw.ustring.char( cp )
end

--- The value a parameter's wikitext stands for (codec.decode_value).
function p.decode( raw )
	return ( raw:gsub( '&([#A-Za-z0-9\128-\255]+);', resolve ) )
end

local function handOn( mode, raw )
	if mode == 'text' then
		return ( p.decode( raw ):gsub( '&', '&amp;' ) )
	elseif mode == 'list' or mode == 'keep' then
		return raw
	end
	error( 'S3RM values: unknown mode "' .. mode .. '"' )
end

--- The positional arguments for #set / #subobject, in property order.
function p.arguments( args )
	local names = {}
	for name in pairs( args ) do
		if type( name ) == 'string' then
			names[#names + 1] = name
		end
	end
	table.sort( names )
	local out = {}
	for _, name in ipairs( names ) do
		local mode, raw = args[name]:match( '^(%a+):(.*)$' )
		if not mode then
			error( 'S3RM values: "' .. name .. '" has no mode' )
		end
		if raw ~= '' then
			out[#out + 1] = name .. '=' .. handOn( mode, raw )
			if mode == 'list' then
				out[#out + 1] = '+sep=,'
			end
		end
	end
	return out
end

function p.set( frame )
	local call = p.arguments( frame.args )
	if #call == 0 then
		return ''
	end
	return frame:callParserFunction( '#set', call )
end

function p.subobject( frame )
	local call = p.arguments( frame.args )
	table.insert( call, 1, frame.args[1] )
	return frame:callParserFunction( '#subobject', call )
end

-- JSON text in ASCII only: spaces, "|" and every non-ASCII character as \u escapes,
-- so nothing between here and a reader (typography rules such as a no-break
-- space before ";", Unicode normalisation of API output) can change it, and
-- mw.text.nowiki writes no "&#124;" (which Semantic MediaWiki turns back into
-- "|" on the page, docs/browser.md#smw-page-forms-behaviours).
local function asciiJson( value )
	local out = {}
	for cp in mw.ustring.gcodepoint( mw.text.jsonEncode( value ) ) do
		if cp == 32 then
			out[#out + 1] = '\\u0020'
		elseif cp == 124 then
			out[#out + 1] = '\\u007c'
		elseif cp < 128 then
			out[#out + 1] = string.char( cp )
		elseif cp < 0x10000 then
			out[#out + 1] = string.format( '\\u%04x', cp )
		else
			cp = cp - 0x10000
			out[#out + 1] = string.format( '\\u%04x\\u%04x', 0xD800 + math.floor( cp / 0x400 ), 0xDC00 + cp % 0x400 )
		end
	end
	return table.concat( out )
end

function p.show( frame )
	return mw.text.nowiki( asciiJson( p.arguments( frame.args ) ) )
end

return p
