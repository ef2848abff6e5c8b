/*
 * S3 Research Memory — MediaWiki:Common.js
 *
 * Synchronised from the repository (schema/site/Common.js) by `s3rm sync push`.
 * Do not edit this page on the wiki: the next push overwrites it.
 *
 * What it does (only on pages that contain the matching containers):
 *   - home page: natural-language search (search_lessons over the MCP endpoint),
 *     the knowledge graph (GET <mcp-url>/graph), the recent-Lessons list when
 *     the wiki has no Semantic MediaWiki, and the Lesson id launcher when it has
 *     no Page Forms;
 *   - Lesson pages: fills `.s3rm-evidence-digest` placeholders via get_lesson.
 *
 * Syntax is ECMAScript 5 on purpose: MediaWiki 1.39 validates site scripts with
 * an ES5 parser and replaces a script it cannot parse with an error. Browser
 * APIs (fetch, Promise, canvas, matchMedia) are used directly. No libraries,
 * no external resources; the only network peers are this wiki and the
 * configured S3 Research Memory gateway.
 *
 * The gateway URL: the home page container's data-mcp-url attribute, else the
 * value sync writes into CONFIGURED_MCP_URL below, else same-origin "/mcp".
 */
( function () {
	'use strict';

	var CONFIGURED_MCP_URL = '%%S3RM_MCP_URL%%';
	var PROTOCOL_VERSION = '2025-06-18';
	var LESSON_NS = 'Lesson';
	var PRELOAD_PAGE = 'Template:S3RM lesson preload';
	// schema/lesson.toml meta.id_pattern: "_" only between two other characters (MediaWiki trims and
	// merges underscores in page titles, docs/data-contract.md#page)
	var ID_PATTERN = /^[a-z0-9-]+(?:_[a-z0-9-]+)*$/;
	var ID_MAX_LENGTH = 120;
	var MAX_NODES = 2000;
	var MAX_EDGES = 10000;
	var SEARCH_LIMIT = 12;
	var RECENT_LIMIT = 6;
	var REQUEST_TIMEOUT_MS = 20000;
	var LAYOUT_BUDGET_MS = 350;
	var LAYOUT_MAX_ITERATIONS = 260;
	var MAX_LABELS = 450;
	var MAX_DIGEST_PAGES = 10;

	var RELATIONS = [ 'supports', 'contradicts', 'analogous_to', 'failed_because', 'works_when', 'suggests', 'supersedes' ];
	var RELATION_LABELS = {
		supports: '뒷받침함',
		contradicts: '반박함',
		analogous_to: '비슷한 사례',
		failed_because: '실패 원인',
		works_when: '잘 맞는 조건',
		suggests: '다음 시도 제안',
		supersedes: '대체함'
	};
	var RELATION_COLORS = {
		supports: '#5cc98f',
		contradicts: '#f07575',
		analogous_to: '#8fb0ff',
		failed_because: '#f2a65a',
		works_when: '#c19bf5',
		suggests: '#56c7cc',
		supersedes: '#e3c55a'
	};
	var SYMMETRIC = { analogous_to: true };
	var CONFIDENCE_LABELS = { low: '낮음', medium: '보통', high: '높음' };
	var CONFIDENCE_COLORS = { high: '#4fbf86', medium: '#8c9cff', low: '#e7a24f' };
	var UNKNOWN_COLOR = '#9aa3bf';
	var SIMILAR_COLOR = '#aeb6cf';
	var SIMILAR_LABEL = '내용이 비슷함 (자동 추정, 저장된 관계 아님)';
	var LABEL_FONT = '12px "Noto Sans KR", "Apple SD Gothic Neo", "Malgun Gothic", sans-serif';
	var SEARCH_EXAMPLES = [
		'재시도가 한꺼번에 몰려 지연이 커진 경우',
		'설정을 바꾼 뒤 장애가 다른 지역으로 번진 사례',
		'인증서가 만료되어 접속이 끊긴 일'
	];

	// ------------------------------------------------------------------ utilities

	function el( tag, attrs, children ) {
		var node = document.createElement( tag );
		var key, i, list;
		if ( attrs ) {
			for ( key in attrs ) {
				if ( !Object.prototype.hasOwnProperty.call( attrs, key ) || attrs[ key ] === null || attrs[ key ] === undefined || attrs[ key ] === false ) {
					continue;
				}
				if ( key === 'text' ) {
					node.textContent = String( attrs[ key ] );
				} else if ( key === 'className' ) {
					node.className = attrs[ key ];
				} else if ( key === 'hidden' ) {
					node.hidden = true;
				} else {
					node.setAttribute( key, attrs[ key ] === true ? '' : String( attrs[ key ] ) );
				}
			}
		}
		if ( children !== undefined && children !== null ) {
			list = Array.isArray( children ) ? children : [ children ];
			for ( i = 0; i < list.length; i++ ) {
				if ( list[ i ] === null || list[ i ] === undefined || list[ i ] === false ) {
					continue;
				}
				node.appendChild( typeof list[ i ] === 'string' ? document.createTextNode( list[ i ] ) : list[ i ] );
			}
		}
		return node;
	}

	function clear( node ) {
		while ( node.firstChild ) {
			node.removeChild( node.firstChild );
		}
	}

	// the user-perceived characters of text: Intl.Segmenter's graphemes where the browser has it,
	// else code points with combining marks, variation selectors and ZWJ sequences kept on their base
	// (so a cut never leaves half of a surrogate pair or of an emoji)
	function graphemes( text ) {
		var out = [], iterator, step, i, ch, code;
		if ( typeof Intl !== 'undefined' && typeof Intl.Segmenter === 'function' && typeof Symbol === 'function' ) {
			iterator = new Intl.Segmenter( undefined, { granularity: 'grapheme' } ).segment( text )[ Symbol.iterator ]();
			for ( step = iterator.next(); !step.done; step = iterator.next() ) {
				out.push( step.value.segment );
			}
			return out;
		}
		for ( i = 0; i < text.length; i++ ) {
			ch = text.charAt( i );
			code = text.charCodeAt( i );
			if ( code >= 0xD800 && code <= 0xDBFF && i + 1 < text.length ) {
				i++;
				ch += text.charAt( i );
			}
			if ( out.length && ( /^[\u0300-\u036f\u200d\ufe0e\ufe0f]|^\ud83c[\udffb-\udfff]/.test( ch ) || /\u200d$/.test( out[ out.length - 1 ] ) ) ) {
				out[ out.length - 1 ] += ch;
			} else {
				out.push( ch );
			}
		}
		return out;
	}

	// text on one line, at most max user-perceived characters (the last one an ellipsis when cut)
	function clip( text, max ) {
		var parts;
		text = String( text === null || text === undefined ? '' : text ).replace( /\s+/g, ' ' ).trim();
		if ( text.length <= max ) {
			return text;
		}
		parts = graphemes( text );
		return parts.length > max ? parts.slice( 0, max - 1 ).join( '' ) + '…' : text;
	}

	function bareId( id ) {
		id = String( id || '' );
		return id.indexOf( LESSON_NS + ':' ) === 0 ? id.slice( LESSON_NS.length + 1 ) : id;
	}

	function lessonUrl( id, query ) {
		return mw.util.getUrl( LESSON_NS + ':' + bareId( id ), query );
	}

	function formatDate( iso ) {
		var m = /^(\d{4})-(\d{2})-(\d{2})/.exec( String( iso || '' ) );
		return m ? m[ 1 ] + '. ' + Number( m[ 2 ] ) + '. ' + Number( m[ 3 ] ) + '.' : '';
	}

	var ISO_UTC = /\b(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)\b/;
	var localFormat = null;

	/** An ISO-8601 UTC value in the reader's time zone ("2026. 12. 1. 오후 3:04 GMT+9"); '' if unparsable. */
	function localTime( iso ) {
		var ms = ISO_UTC.test( String( iso || '' ) ) ? Date.parse( iso ) : NaN;
		if ( isNaN( ms ) ) {
			return '';
		}
		try {
			localFormat = localFormat || new Intl.DateTimeFormat( 'ko-KR', {
				year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: '2-digit', timeZoneName: 'short'
			} );
			return localFormat.format( new Date( ms ) );
		} catch ( e ) {
			return formatDate( iso );
		}
	}

	/** A <time> element: the local time as text, the UTC value in datetime and in the tooltip. */
	function timeEl( iso, prefix, className ) {
		var shown = localTime( iso );
		return el( 'time', {
			className: 's3rm-local-time' + ( className ? ' ' + className : '' ),
			datetime: iso,
			title: 'UTC ' + iso
		}, ( prefix || '' ) + ( shown || iso ) );
	}

	/** Rewrite the raw UTC timestamps the templates print (Lesson pages) as local <time> elements. */
	function localizeTimes( scope ) {
		var holders = ( scope || document ).querySelectorAll( '.s3rm-created-at, .s3rm-updated-at, .s3rm-added-at, .s3rm-verified-at, .s3rm-summary-updated' );
		var i, holder, text, m, node;
		for ( i = 0; i < holders.length && i < 2000; i++ ) {
			holder = holders[ i ];
			if ( holder.querySelector( 'time' ) ) {
				continue;
			}
			text = holder.textContent;
			m = ISO_UTC.exec( text );
			if ( !m ) {
				continue;
			}
			node = timeEl( m[ 1 ] );
			clear( holder );
			if ( m.index > 0 ) {
				holder.appendChild( document.createTextNode( text.slice( 0, m.index ) ) );
			}
			holder.appendChild( node );
			if ( m.index + m[ 1 ].length < text.length ) {
				holder.appendChild( document.createTextNode( text.slice( m.index + m[ 1 ].length ) ) );
			}
		}
	}

	/** The Lesson id under a title, so two Lessons with the same title are told apart. */
	function idEl( id ) {
		return el( 'code', { className: 's3rm-lesson-id', title: '문서 ID' }, id );
	}

	function confidenceBadge( confidence ) {
		var value = CONFIDENCE_LABELS[ confidence ] ? confidence : 'unknown';
		return el( 'span', {
			className: 's3rm-badge s3rm-confidence s3rm-confidence-' + value,
			title: '신뢰도'
		}, CONFIDENCE_LABELS[ confidence ] ? '신뢰도 ' + CONFIDENCE_LABELS[ confidence ] : '신뢰도 미기재' );
	}

	// a Lesson another Lesson corrects (search_lessons `standing`; the graph's supersedes / contradicts
	// edges): one badge naming how, so a reader sees it before trusting the Lesson
	var STANDING_LABELS = { superseded_by: '대체됨', contradicted_by: '반박됨', evidence_contradicted: '근거 반박' };

	function standingBadge( standing ) {
		var kinds = [];
		var ids = [];
		var key;
		for ( key in STANDING_LABELS ) {
			if ( standing && Array.isArray( standing[ key ] ) && standing[ key ].length ) {
				kinds.push( STANDING_LABELS[ key ] );
				ids.push( STANDING_LABELS[ key ] + ': ' + standing[ key ].slice( 0, 10 ).join( ', ' ) );
			}
		}
		if ( !kinds.length ) {
			return null;
		}
		return el( 'span', { className: 's3rm-badge s3rm-standing', title: ids.join( ' / ' ) }, '⚠ ' + kinds.join( ' · ' ) );
	}

	function reducedMotion() {
		return !!( window.matchMedia && window.matchMedia( '(prefers-reduced-motion: reduce)' ).matches );
	}

	function now() {
		return ( window.performance && performance.now ) ? performance.now() : Date.now();
	}

	function mark( name ) {
		if ( window.performance && performance.mark ) {
			try {
				performance.mark( name );
			} catch ( e ) {}
		}
	}

	function mcpUrl() {
		var holder = document.querySelector( '[data-mcp-url]' );
		var candidates = [ holder ? holder.getAttribute( 'data-mcp-url' ) : '', CONFIGURED_MCP_URL ];
		var i, url;
		for ( i = 0; i < candidates.length; i++ ) {
			url = String( candidates[ i ] || '' ).trim();
			if ( url && url.indexOf( '%%' ) === -1 && ( /^https?:\/\/[^\s"'<>]+$/.test( url ) || /^\/[^\s"'<>]*$/.test( url ) ) ) {
				return url.replace( /\/+$/, '' );
			}
		}
		return '/mcp';
	}

	// ------------------------------------------------------------ gateway client

	var rpcCounter = 0;

	function withTimeout( promiseFactory, ms ) {
		var controller = window.AbortController ? new AbortController() : null;
		var timer = setTimeout( function () {
			if ( controller ) {
				controller.abort();
			}
		}, ms );
		return promiseFactory( controller ? controller.signal : undefined ).then( function ( value ) {
			clearTimeout( timer );
			return value;
		}, function ( error ) {
			clearTimeout( timer );
			throw error;
		} );
	}

	function gatewayError( code, message ) {
		var error = new Error( message );
		error.code = code;
		return error;
	}

	function parseRpcBody( text, contentType, id ) {
		var messages = [];
		var blocks, i, lines, j, data;
		if ( /text\/event-stream/i.test( contentType || '' ) ) {
			blocks = text.split( /\r?\n\r?\n/ );
			for ( i = 0; i < blocks.length && i < 1000; i++ ) {
				lines = blocks[ i ].split( /\r?\n/ );
				data = [];
				for ( j = 0; j < lines.length; j++ ) {
					if ( lines[ j ].indexOf( 'data:' ) === 0 ) {
						data.push( lines[ j ].slice( 5 ).replace( /^ /, '' ) );
					}
				}
				if ( data.length ) {
					try {
						messages.push( JSON.parse( data.join( '\n' ) ) );
					} catch ( e ) {}
				}
			}
		} else {
			messages.push( JSON.parse( text ) );
		}
		for ( i = 0; i < messages.length; i++ ) {
			if ( messages[ i ] && messages[ i ].id === id ) {
				return messages[ i ];
			}
		}
		throw gatewayError( 'bad_response', 'no JSON-RPC response for request ' + id );
	}

	/**
	 * Send one stateless JSON-RPC request to the MCP endpoint; resolves with its `result`.
	 * Rejects with an Error whose `code` is 'rpc_<n>', 'http_<status>', 'bad_response',
	 * 'network' or 'timeout'.
	 */
	function rpc( method, params ) {
		var id = ++rpcCounter;
		var body = JSON.stringify( { jsonrpc: '2.0', id: id, method: method, params: params } );
		return withTimeout( function ( signal ) {
			return fetch( mcpUrl(), {
				method: 'POST',
				headers: {
					'Content-Type': 'application/json',
					Accept: 'application/json, text/event-stream',
					'MCP-Protocol-Version': PROTOCOL_VERSION
				},
				body: body,
				credentials: 'omit',
				cache: 'no-store',
				signal: signal
			} );
		}, REQUEST_TIMEOUT_MS ).then( function ( response ) {
			var type = response.headers.get( 'Content-Type' ) || '';
			return response.text().then( function ( text ) {
				var message;
				try {
					message = parseRpcBody( text, type, id );
				} catch ( e ) {
					throw gatewayError( response.ok ? 'bad_response' : 'http_' + response.status, 'gateway answered HTTP ' + response.status );
				}
				if ( message.error ) {
					throw gatewayError( 'rpc_' + message.error.code, message.error.message || 'JSON-RPC error' );
				}
				return message.result || {};
			} );
		}, function ( error ) {
			throw gatewayError( error && error.name === 'AbortError' ? 'timeout' : 'network', 'gateway unreachable' );
		} );
	}

	/**
	 * Call one MCP tool (tools/call). Resolves with its structuredContent; a tool
	 * failure rejects with an Error whose `code` is the tool's error code.
	 */
	function callTool( name, args ) {
		return rpc( 'tools/call', { name: name, arguments: args } ).then( function ( result ) {
			var payload = {};
			if ( result.isError ) {
				try {
					payload = JSON.parse( ( result.content && result.content[ 0 ] && result.content[ 0 ].text ) || '{}' );
				} catch ( e ) {}
				payload = payload.error || {};
				throw gatewayError( payload.code || 'tool_error', payload.message || 'tool error' );
			}
			if ( result.structuredContent ) {
				return result.structuredContent;
			}
			try {
				return JSON.parse( result.content[ 0 ].text );
			} catch ( e ) {
				throw gatewayError( 'bad_response', 'tool result without content' );
			}
		} );
	}

	function fetchGraph() {
		return withTimeout( function ( signal ) {
			return fetch( mcpUrl() + '/graph', {
				method: 'GET',
				headers: { Accept: 'application/json' },
				credentials: 'omit',
				signal: signal
			} );
		}, REQUEST_TIMEOUT_MS ).then( function ( response ) {
			if ( !response.ok ) {
				throw gatewayError( 'http_' + response.status, 'graph request failed' );
			}
			return response.json();
		}, function ( error ) {
			throw gatewayError( error && error.name === 'AbortError' ? 'timeout' : 'network', 'gateway unreachable' );
		} );
	}

	function resultItems( content ) {
		var list = content && ( content.results || content.lessons || content.items );
		return Array.isArray( list ) ? list : [];
	}

	function describeFailure( error ) {
		var code = ( error && error.code ) || '';
		if ( code === 'timeout' ) {
			return '응답이 너무 늦어 중단했습니다. 잠시 뒤 다시 시도하세요.';
		}
		if ( code === 'network' || code === 'http_403' || code === 'http_421' ) {
			return '메모 서버(MCP 게이트웨이)에 연결하지 못했습니다. 계속되면 서버 담당자에게 MCP 주소와 허용 Origin 설정을 확인해 달라고 하세요.';
		}
		if ( code === 'http_429' || code === 'http_503' || code === 'overloaded' ) {
			return '메모 서버가 지금 바쁩니다. 잠시 뒤 다시 시도하세요.';
		}
		return '서버가 제대로 응답하지 않았습니다. 잠시 뒤 다시 시도하거나 전체 텍스트 검색을 이용하세요.';
	}

	// ---------------------------------------------------------------- graph model

	function buildModel( data ) {
		var rawNodes = Array.isArray( data && data.nodes ) ? data.nodes.slice( 0, MAX_NODES ) : [];
		var rawEdges = Array.isArray( data && data.edges ) ? data.edges.slice( 0, MAX_EDGES ) : [];
		var nodes = [];
		var index = {};
		var edges = [];
		var seen = {};
		var i, raw, id, node, a, b, key, relation;
		for ( i = 0; i < rawNodes.length; i++ ) {
			raw = rawNodes[ i ] || {};
			id = bareId( raw.id );
			if ( !id || Object.prototype.hasOwnProperty.call( index, id ) ) {
				continue;
			}
			node = {
				id: id,
				title: clip( raw.title || id, 200 ),
				label: clip( raw.title || id, 26 ),
				confidence: String( raw.confidence || '' ),
				updatedAt: String( raw.updated_at || '' ),
				index: nodes.length,
				degree: 0,
				similar: [],
				out: [],
				inc: [],
				x: 0,
				y: 0,
				homeX: 0,
				homeY: 0,
				lower: ( String( raw.title || '' ) + ' ' + id ).toLowerCase()
			};
			index[ id ] = node.index;
			nodes.push( node );
		}
		for ( i = 0; i < rawEdges.length; i++ ) {
			raw = rawEdges[ i ] || {};
			relation = String( raw.relation || '' );
			a = index[ bareId( raw.from ) ];
			b = index[ bareId( raw.to ) ];
			if ( a === undefined || b === undefined || a === b || !RELATION_LABELS[ relation ] ) {
				continue;
			}
			key = a + '|' + b + '|' + relation;
			if ( seen[ key ] ) {
				continue;
			}
			seen[ key ] = true;
			edges.push( { a: a, b: b, relation: relation } );
			nodes[ a ].degree++;
			nodes[ b ].degree++;
			nodes[ a ].out.push( edges.length - 1 );
			nodes[ b ].inc.push( edges.length - 1 );
			if ( relation === 'supersedes' || relation === 'contradicts' ) {
				key = relation === 'supersedes' ? 'superseded_by' : 'contradicted_by';
				nodes[ b ].standing = nodes[ b ].standing || {};
				( nodes[ b ].standing[ key ] = nodes[ b ].standing[ key ] || [] ).push( nodes[ a ].id );
			}
		}
		var rawSimilar = Array.isArray( data && data.similar ) ? data.similar.slice( 0, MAX_EDGES ) : [];
		var similar = [];
		for ( i = 0; i < rawSimilar.length; i++ ) {
			raw = rawSimilar[ i ] || {};
			a = index[ bareId( raw.from ) ];
			b = index[ bareId( raw.to ) ];
			if ( a === undefined || b === undefined || a === b ) {
				continue;
			}
			similar.push( { a: a, b: b, score: Number( raw.score ) || 0 } );
			nodes[ a ].similar.push( similar.length - 1 );
			nodes[ b ].similar.push( similar.length - 1 );
		}
		return {
			nodes: nodes,
			edges: edges,
			similar: similar,
			// few stored relations (fewer than one per two Lessons): show similarity by default
			showSimilar: similar.length > 0 && edges.length * 2 < nodes.length,
			similarBasis: String( ( data && data.similar_basis ) || '' ),
			index: index,
			truncated: !!( data && data.truncated ) || ( data && data.nodes && data.nodes.length > MAX_NODES ),
			generatedAt: data && data.generated_at
		};
	}

	/**
	 * Deterministic layout: connected Lessons by a bounded force simulation
	 * around the centre, unconnected Lessons packed on rings around them.
	 */
	function layoutModel( model ) {
		var nodes = model.nodes;
		var edges = model.edges;
		var connected = [];
		var isolated = [];
		var parent = {};
		var L = 46;
		var i, j, k, n, t0, iteration, temperature, cell, cx, cy, gx, gy, dx, dy, d2, d, f, fx, fy, step;

		function find( x ) {
			while ( parent[ x ] !== x ) {
				parent[ x ] = parent[ parent[ x ] ];
				x = parent[ x ];
			}
			return x;
		}

		// similarity pairs (when shown) pull Lessons together like weak relations
		if ( model.showSimilar ) {
			edges = edges.concat( model.similar );
		}
		for ( i = 0; i < nodes.length; i++ ) {
			parent[ i ] = i;
			( nodes[ i ].degree > 0 || ( model.showSimilar && nodes[ i ].similar.length ) ? connected : isolated ).push( nodes[ i ] );
		}
		for ( i = 0; i < edges.length; i++ ) {
			parent[ find( edges[ i ].a ) ] = find( edges[ i ].b );
		}
		var componentSize = {};
		for ( i = 0; i < connected.length; i++ ) {
			k = find( connected[ i ].index );
			componentSize[ k ] = ( componentSize[ k ] || 0 ) + 1;
		}
		connected.sort( function ( p, q ) {
			var cp = find( p.index ), cq = find( q.index );
			if ( cp !== cq ) {
				return ( componentSize[ cq ] - componentSize[ cp ] ) || ( cp - cq );
			}
			return ( q.degree - p.degree ) || ( p.id < q.id ? -1 : 1 );
		} );
		// golden-angle spiral start: members of one component sit next to each other
		for ( i = 0; i < connected.length; i++ ) {
			connected[ i ].x = L * 0.75 * Math.sqrt( i + 0.5 ) * Math.cos( i * 2.399963 );
			connected[ i ].y = L * 0.75 * Math.sqrt( i + 0.5 ) * Math.sin( i * 2.399963 );
		}

		n = connected.length;
		// typed arrays: the simulation touches every node a few hundred times
		var X = new Float64Array( n ), Y = new Float64Array( n ), FX = new Float64Array( n ), FY = new Float64Array( n );
		var local = new Int32Array( nodes.length );
		var EA = new Int32Array( edges.length ), EB = new Int32Array( edges.length );
		var cellOf = new Int32Array( n ), order = new Int32Array( n );
		var counts, starts, minGX, minGY, maxGX, maxGY, cols, rows, cells, c, c2, k2, end2;
		for ( i = 0; i < nodes.length; i++ ) {
			local[ i ] = -1;
		}
		for ( i = 0; i < n; i++ ) {
			local[ connected[ i ].index ] = i;
			X[ i ] = connected[ i ].x;
			Y[ i ] = connected[ i ].y;
		}
		for ( i = 0; i < edges.length; i++ ) {
			EA[ i ] = local[ edges[ i ].a ];
			EB[ i ] = local[ edges[ i ].b ];
		}
		t0 = now();
		temperature = L * 2;
		cell = L * 2;
		for ( iteration = 0; iteration < LAYOUT_MAX_ITERATIONS && n > 1; iteration++ ) {
			if ( ( iteration & 7 ) === 0 && now() - t0 > LAYOUT_BUDGET_MS ) {
				break;
			}
			// bucket the nodes into a grid (counting sort; bounded number of cells)
			minGX = Infinity;
			minGY = Infinity;
			maxGX = -Infinity;
			maxGY = -Infinity;
			for ( i = 0; i < n; i++ ) {
				FX[ i ] = 0;
				FY[ i ] = 0;
				gx = Math.floor( X[ i ] / cell );
				gy = Math.floor( Y[ i ] / cell );
				if ( gx < minGX ) { minGX = gx; }
				if ( gy < minGY ) { minGY = gy; }
				if ( gx > maxGX ) { maxGX = gx; }
				if ( gy > maxGY ) { maxGY = gy; }
			}
			cols = maxGX - minGX + 1;
			rows = maxGY - minGY + 1;
			if ( cols * rows > 262144 ) {
				break; // degenerate spread: stop rather than allocate without bound
			}
			cells = cols * rows;
			counts = new Int32Array( cells + 1 );
			for ( i = 0; i < n; i++ ) {
				c = ( Math.floor( X[ i ] / cell ) - minGX ) * rows + ( Math.floor( Y[ i ] / cell ) - minGY );
				cellOf[ i ] = c;
				counts[ c + 1 ]++;
			}
			for ( c = 0; c < cells; c++ ) {
				counts[ c + 1 ] += counts[ c ];
			}
			starts = counts.slice( 0 );
			for ( i = 0; i < n; i++ ) {
				order[ starts[ cellOf[ i ] ]++ ] = i;
			}
			// short-range repulsion within the 3x3 neighbourhood (at most 60 nodes per cell)
			for ( i = 0; i < n; i++ ) {
				gx = Math.floor( cellOf[ i ] / rows );
				gy = cellOf[ i ] - gx * rows;
				for ( cx = gx - 1; cx <= gx + 1; cx++ ) {
					if ( cx < 0 || cx >= cols ) {
						continue;
					}
					for ( cy = gy - 1; cy <= gy + 1; cy++ ) {
						if ( cy < 0 || cy >= rows ) {
							continue;
						}
						c2 = cx * rows + cy;
						end2 = Math.min( counts[ c2 + 1 ], counts[ c2 ] + 60 );
						for ( k2 = counts[ c2 ]; k2 < end2; k2++ ) {
							j = order[ k2 ];
							if ( j === i ) {
								continue;
							}
							dx = X[ i ] - X[ j ];
							dy = Y[ i ] - Y[ j ];
							d2 = dx * dx + dy * dy;
							if ( d2 > cell * cell ) {
								continue;
							}
							if ( d2 < 0.01 ) {
								dx = ( ( i % 7 ) - 3 ) * 0.1 + 0.05;
								dy = ( ( i % 5 ) - 2 ) * 0.1 + 0.05;
								d2 = dx * dx + dy * dy;
							}
							f = ( L * L ) / d2 * 0.5;
							FX[ i ] += dx * f;
							FY[ i ] += dy * f;
						}
					}
				}
			}
			// springs along relations
			for ( i = 0; i < EA.length; i++ ) {
				dx = X[ EB[ i ] ] - X[ EA[ i ] ];
				dy = Y[ EB[ i ] ] - Y[ EA[ i ] ];
				d = Math.sqrt( dx * dx + dy * dy ) || 0.01;
				f = ( d - L ) / d * 0.5;
				FX[ EA[ i ] ] += dx * f;
				FY[ EA[ i ] ] += dy * f;
				FX[ EB[ i ] ] -= dx * f;
				FY[ EB[ i ] ] -= dy * f;
			}
			// gravity keeps the connected part compact and centred; the temperature caps each step
			for ( i = 0; i < n; i++ ) {
				fx = FX[ i ] - X[ i ] * 0.04;
				fy = FY[ i ] - Y[ i ] * 0.04;
				d = Math.sqrt( fx * fx + fy * fy ) || 1;
				step = Math.min( d, temperature );
				X[ i ] += fx / d * step;
				Y[ i ] += fy / d * step;
			}
			temperature = Math.max( 1, temperature * 0.975 );
		}
		for ( i = 0; i < n; i++ ) {
			connected[ i ].x = X[ i ];
			connected[ i ].y = Y[ i ];
		}

		// pack the unconnected Lessons on rings around the connected core
		var radius = 0;
		for ( i = 0; i < n; i++ ) {
			radius = Math.max( radius, Math.sqrt( connected[ i ].x * connected[ i ].x + connected[ i ].y * connected[ i ].y ) );
		}
		var spacing = 15;
		var ring = n ? radius + L * 1.4 : 0;
		var placed = 0;
		var capacity, angleOffset;
		isolated.sort( function ( p, q ) {
			return p.updatedAt < q.updatedAt ? 1 : ( p.updatedAt > q.updatedAt ? -1 : ( p.id < q.id ? -1 : 1 ) );
		} );
		while ( placed < isolated.length ) {
			capacity = ring < spacing / 2 ? 1 : Math.max( 1, Math.floor( 2 * Math.PI * ring / spacing ) );
			angleOffset = ( ring / spacing ) * 0.37;
			for ( k = 0; k < capacity && placed < isolated.length; k++, placed++ ) {
				isolated[ placed ].x = ring * Math.cos( angleOffset + 2 * Math.PI * k / capacity );
				isolated[ placed ].y = ring * Math.sin( angleOffset + 2 * Math.PI * k / capacity );
			}
			ring += spacing;
		}
		for ( i = 0; i < nodes.length; i++ ) {
			nodes[ i ].homeX = nodes[ i ].x;
			nodes[ i ].homeY = nodes[ i ].y;
			nodes[ i ].radius = nodes[ i ].degree > 0 ? 4.5 + Math.min( 7, Math.sqrt( nodes[ i ].degree ) * 1.6 ) : 3.5;
		}
	}

	// ----------------------------------------------------------------- graph view

	function GraphView( root, model, hooks ) {
		this.root = root;
		this.model = model;
		this.hooks = hooks || {};
		this.view = { scale: 1, x: 0, y: 0 };
		this.width = 0;
		this.height = 0;
		this.selected = -1;
		this.hover = -1;
		this.titleFilter = '';
		this.relationFilter = '';
		this.results = null; // { order: [index...], set: {index: rank} }
		this.animation = null;
		this.frameRequested = false;
		this.settleHolds = 0;
		this.settleFrame = null;
		this.build();
		layoutModel( model );
		mark( 's3rm-graph-layout' );
		this.resize();
		this.fit( false );
		this.bind();
		this.draw();
		this.unsettle();
	}

	/**
	 * The "settled" signal (docs/browser.md#graph-settled): `data-settled` on the graph root is "false"
	 * while anything can still move a node on screen (an animation, a pending redraw, a size change, a
	 * held promise such as the page's fonts or the recent list above the graph) and becomes "true", with a
	 * `s3rm-graph-settled` event on the root, once two animation frames have passed with none of them left.
	 * Every move (resize, zoom, pan, animateTo) sets it back to "false".
	 */
	GraphView.prototype.unsettle = function () {
		var self = this;
		if ( this.root.getAttribute( 'data-settled' ) !== 'false' ) {
			this.root.setAttribute( 'data-settled', 'false' );
		}
		if ( this.settleFrame ) {
			return;
		}
		// two frames: ResizeObserver callbacks run after the first frame's layout, before its paint
		this.settleFrame = window.requestAnimationFrame( function () {
			self.settleFrame = window.requestAnimationFrame( function () {
				self.settleFrame = null;
				if ( self.animation || self.frameRequested ) {
					self.unsettle();
				} else if ( self.settleHolds === 0 ) {
					self.root.setAttribute( 'data-settled', 'true' );
					self.root.dispatchEvent( new CustomEvent( 's3rm-graph-settled' ) );
				}
			} );
		} );
	};

	/** Keep the graph unsettled until ``promise`` is done (fulfilled or rejected); returns nothing. */
	GraphView.prototype.holdSettle = function ( promise ) {
		var self = this;
		function release() {
			self.settleHolds -= 1;
			self.unsettle();
		}
		this.settleHolds += 1;
		this.unsettle();
		Promise.resolve( promise ).then( release, release );
	};

	GraphView.prototype.build = function () {
		var self = this;
		var model = this.model;
		var counts = {};
		var options = [ el( 'option', { value: '' }, '모든 관계' ) ];
		var i, r;
		for ( i = 0; i < model.edges.length; i++ ) {
			counts[ model.edges[ i ].relation ] = ( counts[ model.edges[ i ].relation ] || 0 ) + 1;
		}
		for ( i = 0; i < RELATIONS.length; i++ ) {
			r = RELATIONS[ i ];
			options.push( el( 'option', { value: r }, RELATION_LABELS[ r ] + ' (' + ( counts[ r ] || 0 ) + ')' ) );
		}
		this.filterInput = el( 'input', {
			id: 's3rm-graph-filter',
			className: 's3rm-graph-filter-input',
			type: 'search',
			placeholder: '제목으로 거르기',
			'aria-label': '그래프에서 제목으로 메모 거르기',
			autocomplete: 'off',
			maxlength: '200'
		} );
		this.relationSelect = el( 'select', {
			id: 's3rm-graph-relation',
			className: 's3rm-graph-relation-select',
			'aria-label': '관계 종류로 거르기'
		}, options );
		this.similarToggle = el( 'input', { type: 'checkbox', id: 's3rm-graph-similar', checked: model.showSimilar, disabled: !model.similar.length } );
		this.similarControl = el( 'label', {
			className: 's3rm-graph-similar-toggle',
			'for': 's3rm-graph-similar',
			title: '저장된 관계가 아니라 제목과 맥락, 해석에 함께 나오는 낱말로 추정한 연결입니다' + ( model.similarBasis ? ' (' + model.similarBasis + ')' : '' )
		}, [ this.similarToggle, ' 비슷한 메모 잇기 (추정)' ] );
		this.zoomIn = el( 'button', { type: 'button', id: 's3rm-graph-zoom-in', className: 's3rm-graph-button', 'aria-label': '확대', title: '확대' }, '+' );
		this.zoomOut = el( 'button', { type: 'button', id: 's3rm-graph-zoom-out', className: 's3rm-graph-button', 'aria-label': '축소', title: '축소' }, '−' );
		this.zoomFit = el( 'button', { type: 'button', id: 's3rm-graph-fit', className: 's3rm-graph-button s3rm-graph-button-wide', title: '전체 보기' }, '전체 보기' );
		this.canvas = el( 'canvas', {
			id: 's3rm-graph-canvas',
			className: 's3rm-graph-canvas',
			tabindex: '0',
			role: 'application',
			'aria-roledescription': '지식 그래프',
			'aria-label': '메모 ' + model.nodes.length + '개와 관계 ' + model.edges.length + '개의 그래프. 화살표 키로 메모를 고르고 Enter로 엽니다. 더하기와 빼기 키로 확대하거나 축소합니다.',
			'aria-describedby': 's3rm-graph-keys'
		} );
		this.announcer = el( 'div', { className: 's3rm-visually-hidden', 'aria-live': 'polite', id: 's3rm-graph-announcer' } );
		this.inspector = el( 'div', { id: 's3rm-graph-inspector', className: 's3rm-graph-inspector' } );
		this.viewport = el( 'div', { className: 's3rm-graph-viewport' }, [
			this.canvas,
			el( 'div', { className: 's3rm-graph-hint', id: 's3rm-graph-keys' }, '끌어서 이동 · 휠로 확대 · 화살표 키로 선택 · 두 번 누르거나 Enter로 열기' )
		] );
		this.status = el( 'div', { className: 's3rm-graph-stats', id: 's3rm-graph-stats' } );
		this.list = el( 'details', { className: 's3rm-graph-list', id: 's3rm-graph-list' }, [
			el( 'summary', null, '목록으로 보기' ),
			el( 'ul', { className: 's3rm-graph-list-items' } )
		] );
		clear( this.root );
		this.root.appendChild( el( 'div', { className: 's3rm-graph-toolbar', role: 'toolbar', 'aria-label': '그래프 도구' }, [
			el( 'div', { className: 's3rm-graph-filter' }, this.filterInput ),
			this.relationSelect,
			this.similarControl,
			el( 'div', { className: 's3rm-graph-zoom' }, [ this.zoomOut, this.zoomIn, this.zoomFit ] )
		] ) );
		this.root.appendChild( el( 'div', { className: 's3rm-graph-body' }, [ this.viewport, this.inspector ] ) );
		this.legendBox = el( 'div', { className: 's3rm-graph-legend-box' }, this.legend() );
		this.root.appendChild( el( 'div', { className: 's3rm-graph-footer' }, [ this.status, this.legendBox ] ) );
		this.root.appendChild( this.list );
		this.root.appendChild( this.announcer );
		this.ctx = this.canvas.getContext( '2d' );
		this.updateStatus();
		this.showWelcome();
		this.list.addEventListener( 'toggle', function () {
			if ( self.list.open ) {
				self.fillList();
			}
		} );
	};

	GraphView.prototype.legend = function () {
		var items = [];
		var keys = [ 'high', 'medium', 'low' ];
		var i;
		for ( i = 0; i < keys.length; i++ ) {
			items.push( el( 'span', { className: 's3rm-graph-legend-item' }, [
				el( 'i', { className: 's3rm-legend-dot s3rm-legend-' + keys[ i ], 'aria-hidden': 'true' } ),
				'신뢰도 ' + CONFIDENCE_LABELS[ keys[ i ] ]
			] ) );
		}
		items.push( el( 'span', { className: 's3rm-graph-legend-item' }, [
			el( 'i', { className: 's3rm-legend-line s3rm-legend-relation', 'aria-hidden': 'true' } ), '실선: 저장된 관계'
		] ) );
		if ( this.model.showSimilar ) {
			items.push( el( 'span', { className: 's3rm-graph-legend-item', id: 's3rm-legend-similar' }, [
				el( 'i', { className: 's3rm-legend-line s3rm-legend-similar', 'aria-hidden': 'true' } ), '점선: ' + SIMILAR_LABEL
			] ) );
		}
		return el( 'div', { className: 's3rm-graph-legend' }, items );
	};

	GraphView.prototype.updateStatus = function () {
		var model = this.model;
		var connected = 0;
		var i;
		for ( i = 0; i < model.nodes.length; i++ ) {
			if ( model.nodes[ i ].degree > 0 ) {
				connected++;
			}
		}
		this.status.textContent = '메모 ' + model.nodes.length + '개 · 관계 ' + model.edges.length + '개 · 연결된 메모 ' + connected + '개' +
			( model.showSimilar ? ' · 비슷한 내용 연결 ' + model.similar.length + '개 (추정)' : '' ) +
			( model.truncated ? ' · 메모가 많아 일부만 표시합니다' : '' );
		this.root.setAttribute( 'data-similar-count', String( model.similar.length ) );
		this.root.setAttribute( 'data-corrected-count', String( model.nodes.filter( function ( n ) {
			return !!n.standing;
		} ).length ) );
		this.root.setAttribute( 'data-similar-shown', model.showSimilar ? 'true' : 'false' );
	};

	GraphView.prototype.fillList = function () {
		var self = this;
		var ul = this.list.querySelector( 'ul' );
		var order = this.model.nodes.slice().sort( function ( a, b ) {
			return a.title.localeCompare( b.title, 'ko' );
		} );
		var i, node, button;
		clear( ul );
		for ( i = 0; i < order.length; i++ ) {
			node = order[ i ];
			if ( this.titleFilter && node.lower.indexOf( this.titleFilter ) === -1 ) {
				continue;
			}
			button = el( 'button', { type: 'button', className: 's3rm-link-button', 'data-id': node.id }, '그래프에서 보기' );
			ul.appendChild( el( 'li', null, [ el( 'a', { href: lessonUrl( node.id ) }, node.title ), ' ', button ] ) );
		}
		ul.onclick = function ( event ) {
			var target = event.target;
			if ( target && target.getAttribute && target.getAttribute( 'data-id' ) ) {
				self.select( self.model.index[ target.getAttribute( 'data-id' ) ], true );
				self.canvas.focus();
			}
		};
	};

	GraphView.prototype.bind = function () {
		var self = this;
		var canvas = this.canvas;
		var drag = null;

		this.filterInput.addEventListener( 'input', function () {
			self.titleFilter = self.filterInput.value.trim().toLowerCase();
			self.requestDraw();
			if ( self.list.open ) {
				self.fillList();
			}
		} );
		this.filterInput.addEventListener( 'keydown', function ( event ) {
			var i, nodes = self.model.nodes;
			if ( event.key === 'Enter' && self.titleFilter ) {
				event.preventDefault();
				for ( i = 0; i < nodes.length; i++ ) {
					if ( nodes[ i ].lower.indexOf( self.titleFilter ) !== -1 ) {
						self.select( i, true );
						return;
					}
				}
			}
		} );
		this.relationSelect.addEventListener( 'change', function () {
			self.relationFilter = self.relationSelect.value;
			self.requestDraw();
		} );
		this.similarToggle.addEventListener( 'change', function () {
			self.setSimilar( self.similarToggle.checked );
		} );
		this.zoomIn.addEventListener( 'click', function () {
			self.zoomAt( 1.35, self.width / 2, self.height / 2 );
		} );
		this.zoomOut.addEventListener( 'click', function () {
			self.zoomAt( 1 / 1.35, self.width / 2, self.height / 2 );
		} );
		this.zoomFit.addEventListener( 'click', function () {
			self.fit( true );
		} );

		canvas.addEventListener( 'wheel', function ( event ) {
			var rect = canvas.getBoundingClientRect();
			var delta = event.deltaY * ( event.deltaMode === 1 ? 16 : ( event.deltaMode === 2 ? 400 : 1 ) );
			event.preventDefault();
			self.zoomAt( Math.exp( -Math.max( -300, Math.min( 300, delta ) ) * 0.0018 ), event.clientX - rect.left, event.clientY - rect.top );
		}, { passive: false } );
		canvas.addEventListener( 'pointerdown', function ( event ) {
			if ( event.button !== 0 ) {
				return;
			}
			drag = { x: event.clientX, y: event.clientY, vx: self.view.x, vy: self.view.y, moved: false, id: event.pointerId };
			if ( canvas.setPointerCapture ) {
				try {
					canvas.setPointerCapture( event.pointerId );
				} catch ( e ) {}
			}
		} );
		canvas.addEventListener( 'pointermove', function ( event ) {
			var rect, hit;
			if ( drag && drag.id === event.pointerId ) {
				if ( Math.abs( event.clientX - drag.x ) + Math.abs( event.clientY - drag.y ) > 4 ) {
					drag.moved = true;
					canvas.classList.add( 'is-dragging' );
				}
				if ( drag.moved ) {
					self.view.x = drag.vx + event.clientX - drag.x;
					self.view.y = drag.vy + event.clientY - drag.y;
					self.requestDraw();
					self.unsettle();
				}
				return;
			}
			rect = canvas.getBoundingClientRect();
			hit = self.hitTest( event.clientX - rect.left, event.clientY - rect.top );
			if ( hit !== self.hover ) {
				self.hover = hit;
				canvas.style.cursor = hit >= 0 ? 'pointer' : 'grab';
				self.requestDraw();
			}
		} );
		function endDrag( event ) {
			var rect, hit;
			if ( !drag || drag.id !== event.pointerId ) {
				return;
			}
			canvas.classList.remove( 'is-dragging' );
			if ( !drag.moved && event.type === 'pointerup' ) {
				rect = canvas.getBoundingClientRect();
				hit = self.hitTest( event.clientX - rect.left, event.clientY - rect.top );
				self.select( hit, false );
			}
			drag = null;
		}
		canvas.addEventListener( 'pointerup', endDrag );
		canvas.addEventListener( 'pointercancel', endDrag );
		canvas.addEventListener( 'pointerleave', function () {
			if ( self.hover !== -1 && !drag ) {
				self.hover = -1;
				self.requestDraw();
			}
		} );
		canvas.addEventListener( 'dblclick', function ( event ) {
			var rect = canvas.getBoundingClientRect();
			var hit = self.hitTest( event.clientX - rect.left, event.clientY - rect.top );
			if ( hit >= 0 ) {
				event.preventDefault();
				self.open( hit );
			}
		} );
		canvas.addEventListener( 'keydown', function ( event ) {
			self.onKey( event );
		} );
		this.inspector.addEventListener( 'click', function ( event ) {
			var target = event.target;
			while ( target && target !== self.inspector && !( target.getAttribute && target.getAttribute( 'data-node' ) ) ) {
				target = target.parentNode;
			}
			if ( target && target !== self.inspector ) {
				self.select( Number( target.getAttribute( 'data-node' ) ), true );
			}
		} );
		if ( window.ResizeObserver ) {
			this.resizeObserver = new ResizeObserver( function () {
				if ( self.resize() ) {
					self.requestDraw();
				}
			} );
			this.resizeObserver.observe( this.viewport );
		} else {
			window.addEventListener( 'resize', function () {
				if ( self.resize() ) {
					self.requestDraw();
				}
			} );
		}
	};

	GraphView.prototype.onKey = function ( event ) {
		var key = event.key;
		var dirs = { ArrowLeft: [ -1, 0 ], ArrowRight: [ 1, 0 ], ArrowUp: [ 0, -1 ], ArrowDown: [ 0, 1 ] };
		if ( dirs[ key ] ) {
			event.preventDefault();
			if ( event.shiftKey ) {
				this.view.x -= dirs[ key ][ 0 ] * 60;
				this.view.y -= dirs[ key ][ 1 ] * 60;
				this.requestDraw();
				this.unsettle();
			} else {
				this.moveSelection( dirs[ key ][ 0 ], dirs[ key ][ 1 ] );
			}
		} else if ( key === 'Enter' ) {
			if ( this.selected >= 0 ) {
				event.preventDefault();
				this.open( this.selected );
			}
		} else if ( key === ' ' || key === 'Spacebar' ) {
			event.preventDefault();
			if ( this.selected < 0 ) {
				this.moveSelection( 0, 0 );
			} else {
				this.announce( this.model.nodes[ this.selected ] );
			}
		} else if ( key === '+' || key === '=' ) {
			event.preventDefault();
			this.zoomAt( 1.35, this.width / 2, this.height / 2 );
		} else if ( key === '-' || key === '_' ) {
			event.preventDefault();
			this.zoomAt( 1 / 1.35, this.width / 2, this.height / 2 );
		} else if ( key === '0' ) {
			event.preventDefault();
			this.fit( true );
		} else if ( key === 'Escape' ) {
			if ( this.selected >= 0 ) {
				event.preventDefault();
				this.select( -1, false );
			}
		}
	};

	GraphView.prototype.isActive = function ( node ) {
		if ( this.results && !Object.prototype.hasOwnProperty.call( this.results.set, node.index ) ) {
			return false;
		}
		if ( this.titleFilter && node.lower.indexOf( this.titleFilter ) === -1 ) {
			return false;
		}
		if ( this.relationFilter && !this.hasRelation( node, this.relationFilter ) ) {
			return false;
		}
		return true;
	};

	GraphView.prototype.hasRelation = function ( node, relation ) {
		var i, edges = this.model.edges;
		for ( i = 0; i < node.out.length; i++ ) {
			if ( edges[ node.out[ i ] ].relation === relation ) {
				return true;
			}
		}
		for ( i = 0; i < node.inc.length; i++ ) {
			if ( edges[ node.inc[ i ] ].relation === relation ) {
				return true;
			}
		}
		return false;
	};

	GraphView.prototype.moveSelection = function ( dx, dy ) {
		var nodes = this.model.nodes;
		var best = -1;
		var bestScore = Infinity;
		var origin, i, node, vx, vy, dist, cos, score, cxw, cyw;
		if ( this.selected < 0 || ( dx === 0 && dy === 0 ) ) {
			cxw = ( this.width / 2 - this.view.x ) / this.view.scale;
			cyw = ( this.height / 2 - this.view.y ) / this.view.scale;
			for ( i = 0; i < nodes.length; i++ ) {
				if ( !this.isActive( nodes[ i ] ) ) {
					continue;
				}
				vx = nodes[ i ].x - cxw;
				vy = nodes[ i ].y - cyw;
				score = vx * vx + vy * vy - nodes[ i ].degree * 50;
				if ( score < bestScore ) {
					bestScore = score;
					best = i;
				}
			}
		} else {
			origin = nodes[ this.selected ];
			for ( i = 0; i < nodes.length; i++ ) {
				node = nodes[ i ];
				if ( i === this.selected || !this.isActive( node ) ) {
					continue;
				}
				vx = node.x - origin.x;
				vy = node.y - origin.y;
				dist = Math.sqrt( vx * vx + vy * vy );
				if ( dist < 0.001 ) {
					continue;
				}
				cos = ( vx * dx + vy * dy ) / dist;
				if ( cos < 0.5 ) {
					continue;
				}
				score = dist * ( 1 + 2.5 * ( 1 - cos ) );
				if ( score < bestScore ) {
					bestScore = score;
					best = i;
				}
			}
		}
		if ( best >= 0 ) {
			this.select( best, true );
		}
	};

	GraphView.prototype.announce = function ( node ) {
		this.announcer.textContent = node ? node.title + ', 연결 ' + node.degree + '개 선택됨' : '';
	};

	GraphView.prototype.select = function ( index, reveal ) {
		var node, sx, sy, margin = 40;
		this.selected = ( typeof index === 'number' && index >= 0 && index < this.model.nodes.length ) ? index : -1;
		if ( this.selected < 0 ) {
			this.showWelcome();
			this.announce( null );
			this.requestDraw();
			return;
		}
		node = this.model.nodes[ this.selected ];
		this.showNode( node );
		this.announce( node );
		if ( reveal ) {
			sx = node.x * this.view.scale + this.view.x;
			sy = node.y * this.view.scale + this.view.y;
			if ( sx < margin || sy < margin || sx > this.width - margin || sy > this.height - margin ) {
				this.view.x += this.width / 2 - sx;
				this.view.y += this.height / 2 - sy;
			}
		}
		this.requestDraw();
	};

	GraphView.prototype.open = function ( index ) {
		var node = this.model.nodes[ index ];
		if ( node ) {
			window.location.href = lessonUrl( node.id );
		}
	};

	GraphView.prototype.showWelcome = function () {
		clear( this.inspector );
		this.inspector.appendChild( el( 'div', { className: 's3rm-inspector-welcome' }, [
			el( 'strong', null, '메모를 골라 보세요' ),
			el( 'p', null, '점을 한 번 누르면 연결 수와 관계 종류가 여기에 나오고, 두 번 누르면 메모가 열립니다.' )
		] ) );
	};

	GraphView.prototype.showNode = function ( node ) {
		var model = this.model;
		var counts = {};
		var neighbours = [];
		var rows = [];
		var i, e, r, other, arrow;
		for ( i = 0; i < node.out.length; i++ ) {
			e = model.edges[ node.out[ i ] ];
			counts[ e.relation ] = ( counts[ e.relation ] || 0 ) + 1;
			neighbours.push( { index: e.b, relation: e.relation, arrow: SYMMETRIC[ e.relation ] ? '↔' : '→' } );
		}
		for ( i = 0; i < node.inc.length; i++ ) {
			e = model.edges[ node.inc[ i ] ];
			counts[ e.relation ] = ( counts[ e.relation ] || 0 ) + 1;
			neighbours.push( { index: e.a, relation: e.relation, arrow: SYMMETRIC[ e.relation ] ? '↔' : '←' } );
		}
		for ( i = 0; i < RELATIONS.length; i++ ) {
			r = RELATIONS[ i ];
			if ( counts[ r ] ) {
				rows.push( el( 'li', null, [
					el( 'span', { className: 's3rm-relation-label s3rm-relation-' + r }, RELATION_LABELS[ r ] ),
					el( 'strong', null, String( counts[ r ] ) )
				] ) );
			}
		}
		clear( this.inspector );
		this.inspector.appendChild( el( 'div', { className: 's3rm-inspector-kicker' }, '선택한 메모' ) );
		this.inspector.appendChild( el( 'h3', { className: 's3rm-inspector-title' }, node.title ) );
		this.inspector.appendChild( el( 'div', { className: 's3rm-inspector-meta' }, [
			confidenceBadge( node.confidence ),
			standingBadge( node.standing ),
			node.updatedAt ? timeEl( node.updatedAt, '수정 ' ) : null
		] ) );
		this.inspector.appendChild( el( 'p', { className: 's3rm-inspector-degree', id: 's3rm-inspector-degree' },
			node.degree ? '연결 ' + node.degree + '개' : '아직 연결된 메모가 없습니다' ) );
		if ( rows.length ) {
			this.inspector.appendChild( el( 'ul', { className: 's3rm-inspector-relations' }, rows ) );
		}
		if ( neighbours.length ) {
			this.inspector.appendChild( el( 'ul', { className: 's3rm-inspector-neighbours' }, neighbours.slice( 0, 12 ).map( function ( item ) {
				other = model.nodes[ item.index ];
				arrow = item.arrow;
				return el( 'li', null, el( 'button', { type: 'button', className: 's3rm-link-button', 'data-node': String( item.index ) }, [
					el( 'span', { className: 's3rm-inspector-arrow', 'aria-hidden': 'true' }, arrow ),
					' ' + RELATION_LABELS[ item.relation ] + ' · ' + clip( other.title, 60 )
				] ) );
			} ) ) );
			if ( neighbours.length > 12 ) {
				this.inspector.appendChild( el( 'p', { className: 's3rm-inspector-muted' }, '그 밖에 ' + ( neighbours.length - 12 ) + '개 더 있습니다.' ) );
			}
		}
		if ( model.showSimilar && node.similar.length ) {
			this.inspector.appendChild( el( 'div', { className: 's3rm-inspector-kicker s3rm-inspector-similar-head' }, SIMILAR_LABEL ) );
			this.inspector.appendChild( el( 'ul', { className: 's3rm-inspector-similar' }, node.similar.slice( 0, 8 ).map( function ( k ) {
				var pair = model.similar[ k ];
				other = model.nodes[ pair.a === node.index ? pair.b : pair.a ];
				return el( 'li', null, el( 'button', { type: 'button', className: 's3rm-link-button', 'data-node': String( other.index ) }, [
					el( 'span', { className: 's3rm-inspector-arrow', 'aria-hidden': 'true' }, '≈' ),
					' ' + clip( other.title, 60 ) + ' · ' + Math.round( pair.score * 100 ) + '%'
				] ) );
			} ) ) );
		}
		this.inspector.appendChild( el( 'a', { className: 's3rm-graph-primary-link', href: lessonUrl( node.id ) }, '메모 열기' ) );
		this.inspector.appendChild( el( 'p', { className: 's3rm-inspector-muted' }, '문서 ID ' + node.id ) );
	};

	/** Show or hide the estimated similarity links; the layout is recomputed with or without them. */
	GraphView.prototype.setSimilar = function ( on ) {
		var model = this.model;
		model.showSimilar = !!on && model.similar.length > 0;
		this.similarToggle.checked = model.showSimilar;
		this.results = null;
		layoutModel( model );
		clear( this.legendBox );
		this.legendBox.appendChild( this.legend() );
		this.updateStatus();
		this.fit( false );
		if ( this.selected >= 0 ) {
			this.showNode( model.nodes[ this.selected ] );
		}
		this.requestDraw();
	};

	GraphView.prototype.resize = function () {
		var width = Math.max( 200, this.viewport.clientWidth || 600 );
		var height = Math.max( 240, this.viewport.clientHeight || 480 );
		var dpr = Math.min( 3, window.devicePixelRatio || 1 );
		if ( width === this.width && height === this.height && dpr === this.dpr ) {
			return false;
		}
		if ( this.width ) {
			this.view.x += ( width - this.width ) / 2;
			this.view.y += ( height - this.height ) / 2;
		}
		this.width = width;
		this.height = height;
		this.dpr = dpr;
		this.canvas.width = Math.round( width * dpr );
		this.canvas.height = Math.round( height * dpr );
		this.canvas.style.width = width + 'px';
		this.canvas.style.height = height + 'px';
		this.unsettle();
		return true;
	};

	GraphView.prototype.boundsView = function ( indices ) {
		var nodes = this.model.nodes;
		var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
		var i, node, scale, pad = 60;
		for ( i = 0; i < indices.length; i++ ) {
			node = nodes[ indices[ i ] ];
			minX = Math.min( minX, node.x );
			minY = Math.min( minY, node.y );
			maxX = Math.max( maxX, node.x );
			maxY = Math.max( maxY, node.y );
		}
		if ( minX === Infinity ) {
			return { scale: 1, x: this.width / 2, y: this.height / 2 };
		}
		scale = Math.min( ( this.width - pad ) / Math.max( 1, maxX - minX ), ( this.height - pad ) / Math.max( 1, maxY - minY ) );
		scale = Math.max( 0.05, Math.min( 2.2, scale ) );
		return {
			scale: scale,
			x: this.width / 2 - ( minX + maxX ) / 2 * scale,
			y: this.height / 2 - ( minY + maxY ) / 2 * scale
		};
	};

	GraphView.prototype.fit = function ( animate ) {
		var all = [];
		var i;
		for ( i = 0; i < this.model.nodes.length; i++ ) {
			all.push( i );
		}
		this.animateTo( null, this.boundsView( all ), animate );
	};

	GraphView.prototype.zoomAt = function ( factor, sx, sy ) {
		var scale = Math.max( 0.05, Math.min( 8, this.view.scale * factor ) );
		factor = scale / this.view.scale;
		this.view.x = sx - ( sx - this.view.x ) * factor;
		this.view.y = sy - ( sy - this.view.y ) * factor;
		this.view.scale = scale;
		this.requestDraw();
		this.unsettle();
	};

	/** Move nodes (targets: array of [x, y] per node, or null) and the view, animated unless motion is reduced. */
	GraphView.prototype.animateTo = function ( targets, view, animate ) {
		var self = this;
		var nodes = this.model.nodes;
		var start = now();
		var duration = 450;
		var from = [];
		var fromView = { scale: this.view.scale, x: this.view.x, y: this.view.y };
		var i;
		this.unsettle();
		if ( this.animation ) {
			window.cancelAnimationFrame( this.animation );
			this.animation = null;
		}
		if ( !animate || reducedMotion() ) {
			if ( targets ) {
				for ( i = 0; i < nodes.length; i++ ) {
					nodes[ i ].x = targets[ i ][ 0 ];
					nodes[ i ].y = targets[ i ][ 1 ];
				}
			}
			if ( view ) {
				this.view = view;
			}
			this.requestDraw();
			return;
		}
		if ( targets ) {
			for ( i = 0; i < nodes.length; i++ ) {
				from.push( [ nodes[ i ].x, nodes[ i ].y ] );
			}
		}
		function frame() {
			var t = Math.min( 1, ( now() - start ) / duration );
			var k = t < 0.5 ? 2 * t * t : 1 - Math.pow( -2 * t + 2, 2 ) / 2;
			var j;
			if ( targets ) {
				for ( j = 0; j < nodes.length; j++ ) {
					nodes[ j ].x = from[ j ][ 0 ] + ( targets[ j ][ 0 ] - from[ j ][ 0 ] ) * k;
					nodes[ j ].y = from[ j ][ 1 ] + ( targets[ j ][ 1 ] - from[ j ][ 1 ] ) * k;
				}
			}
			if ( view ) {
				self.view = {
					scale: fromView.scale + ( view.scale - fromView.scale ) * k,
					x: fromView.x + ( view.x - fromView.x ) * k,
					y: fromView.y + ( view.y - fromView.y ) * k
				};
			}
			self.draw();
			self.animation = t < 1 ? window.requestAnimationFrame( frame ) : null;
		}
		this.animation = window.requestAnimationFrame( frame );
	};

	/** Gather the ranked result nodes at the centre and dim the rest; ids not in the graph are ignored. */
	GraphView.prototype.showResults = function ( ids ) {
		var model = this.model;
		var order = [];
		var set = {};
		var targets = [];
		var i, index, spacing = 34;
		for ( i = 0; i < ids.length; i++ ) {
			index = model.index[ bareId( ids[ i ] ) ];
			if ( index !== undefined && !Object.prototype.hasOwnProperty.call( set, index ) ) {
				set[ index ] = order.length;
				order.push( index );
			}
		}
		this.results = { order: order, set: set };
		for ( i = 0; i < model.nodes.length; i++ ) {
			targets.push( [ model.nodes[ i ].homeX, model.nodes[ i ].homeY ] );
		}
		for ( i = 0; i < order.length; i++ ) {
			targets[ order[ i ] ] = [
				spacing * Math.sqrt( i ) * Math.cos( i * 2.399963 ),
				spacing * Math.sqrt( i ) * Math.sin( i * 2.399963 )
			];
		}
		var saved = [];
		for ( i = 0; i < model.nodes.length; i++ ) {
			saved.push( [ model.nodes[ i ].x, model.nodes[ i ].y ] );
			model.nodes[ i ].x = targets[ i ][ 0 ];
			model.nodes[ i ].y = targets[ i ][ 1 ];
		}
		var view = order.length ? this.boundsView( order ) : null;
		if ( view ) {
			view.scale = Math.min( view.scale, 1.6 );
			view.x = this.width / 2;
			view.y = this.height / 2;
		}
		for ( i = 0; i < model.nodes.length; i++ ) {
			model.nodes[ i ].x = saved[ i ][ 0 ];
			model.nodes[ i ].y = saved[ i ][ 1 ];
		}
		this.root.setAttribute( 'data-search-results', String( order.length ) );
		this.animateTo( targets, view, true );
		return order.length;
	};

	GraphView.prototype.clearResults = function () {
		var targets = [];
		var i, all = [];
		this.results = null;
		this.root.removeAttribute( 'data-search-results' );
		for ( i = 0; i < this.model.nodes.length; i++ ) {
			targets.push( [ this.model.nodes[ i ].homeX, this.model.nodes[ i ].homeY ] );
			all.push( i );
		}
		var saved = [];
		for ( i = 0; i < this.model.nodes.length; i++ ) {
			saved.push( [ this.model.nodes[ i ].x, this.model.nodes[ i ].y ] );
			this.model.nodes[ i ].x = targets[ i ][ 0 ];
			this.model.nodes[ i ].y = targets[ i ][ 1 ];
		}
		var view = this.boundsView( all );
		for ( i = 0; i < this.model.nodes.length; i++ ) {
			this.model.nodes[ i ].x = saved[ i ][ 0 ];
			this.model.nodes[ i ].y = saved[ i ][ 1 ];
		}
		this.animateTo( targets, view, true );
	};

	GraphView.prototype.hitTest = function ( sx, sy ) {
		var nodes = this.model.nodes;
		var best = -1;
		var bestD = Infinity;
		var i, node, px, py, d, r;
		for ( i = 0; i < nodes.length; i++ ) {
			node = nodes[ i ];
			px = node.x * this.view.scale + this.view.x;
			py = node.y * this.view.scale + this.view.y;
			r = Math.max( 6, node.radius * Math.min( 1.6, Math.max( 0.7, this.view.scale ) ) + 4 );
			d = ( px - sx ) * ( px - sx ) + ( py - sy ) * ( py - sy );
			if ( d <= r * r && ( d < bestD || ( this.isActive( node ) && best >= 0 && !this.isActive( nodes[ best ] ) ) ) ) {
				bestD = d;
				best = i;
			}
		}
		return best;
	};

	GraphView.prototype.requestDraw = function () {
		var self = this;
		if ( this.frameRequested ) {
			return;
		}
		this.frameRequested = true;
		window.requestAnimationFrame( function () {
			self.frameRequested = false;
			self.draw();
		} );
	};

	GraphView.prototype.draw = function () {
		var ctx = this.ctx;
		var model = this.model;
		var nodes = model.nodes;
		var edges = model.edges;
		var view = this.view;
		var dpr = this.dpr || 1;
		var active = new Array( nodes.length );
		var focus = {};
		var i, j, e, a, b, node, relation, pass, bright, r, px, py, sel, drawn;
		var anyFilter = !!( this.results || this.titleFilter || this.relationFilter );

		ctx.setTransform( dpr, 0, 0, dpr, 0, 0 );
		ctx.clearRect( 0, 0, this.width, this.height );
		for ( i = 0; i < nodes.length; i++ ) {
			active[ i ] = this.isActive( nodes[ i ] );
		}
		sel = this.selected >= 0 ? nodes[ this.selected ] : null;
		if ( sel ) {
			focus[ sel.index ] = true;
			for ( i = 0; i < sel.out.length; i++ ) {
				focus[ edges[ sel.out[ i ] ].b ] = true;
			}
			for ( i = 0; i < sel.inc.length; i++ ) {
				focus[ edges[ sel.inc[ i ] ].a ] = true;
			}
		}

		// estimated similarity: dashed grey, beneath the stored relations
		if ( model.showSimilar && model.similar.length ) {
			ctx.save();
			ctx.setLineDash( [ 4, 4 ] );
			ctx.lineWidth = 1;
			ctx.strokeStyle = SIMILAR_COLOR;
			ctx.globalAlpha = anyFilter || sel ? 0.18 : 0.5;
			ctx.beginPath();
			for ( i = 0; i < model.similar.length; i++ ) {
				e = model.similar[ i ];
				a = nodes[ e.a ];
				b = nodes[ e.b ];
				ctx.moveTo( a.x * view.scale + view.x, a.y * view.scale + view.y );
				ctx.lineTo( b.x * view.scale + view.x, b.y * view.scale + view.y );
			}
			ctx.stroke();
			ctx.restore();
		}
		// edges: dim pass first, then bright pass, grouped by relation colour
		ctx.lineWidth = Math.max( 0.6, Math.min( 2, 1.1 * Math.sqrt( view.scale ) ) );
		for ( pass = 0; pass < 2; pass++ ) {
			for ( j = 0; j < RELATIONS.length; j++ ) {
				relation = RELATIONS[ j ];
				ctx.beginPath();
				drawn = 0;
				for ( i = 0; i < edges.length; i++ ) {
					e = edges[ i ];
					if ( e.relation !== relation ) {
						continue;
					}
					bright = active[ e.a ] && active[ e.b ] && ( !this.relationFilter || relation === this.relationFilter );
					if ( sel ) {
						bright = bright && ( e.a === sel.index || e.b === sel.index );
					}
					if ( ( pass === 1 ) !== bright ) {
						continue;
					}
					a = nodes[ e.a ];
					b = nodes[ e.b ];
					ctx.moveTo( a.x * view.scale + view.x, a.y * view.scale + view.y );
					ctx.lineTo( b.x * view.scale + view.x, b.y * view.scale + view.y );
					drawn++;
				}
				if ( drawn ) {
					ctx.strokeStyle = RELATION_COLORS[ relation ];
					ctx.globalAlpha = pass === 1 ? ( sel || anyFilter ? 0.95 : 0.55 ) : 0.08;
					ctx.stroke();
				}
			}
		}
		// arrowheads for directed relations on bright edges when zoomed in enough
		if ( view.scale > 0.7 && edges.length <= 4000 ) {
			ctx.globalAlpha = 0.9;
			for ( i = 0; i < edges.length; i++ ) {
				e = edges[ i ];
				if ( SYMMETRIC[ e.relation ] || !active[ e.a ] || !active[ e.b ] || ( this.relationFilter && e.relation !== this.relationFilter ) ) {
					continue;
				}
				if ( sel && e.a !== sel.index && e.b !== sel.index ) {
					continue;
				}
				this.arrow( nodes[ e.a ], nodes[ e.b ], RELATION_COLORS[ e.relation ] );
			}
		}

		// nodes: inactive first, then active
		for ( pass = 0; pass < 2; pass++ ) {
			for ( i = 0; i < nodes.length; i++ ) {
				node = nodes[ i ];
				bright = active[ i ] && ( !sel || focus[ i ] || !anyFilter );
				if ( ( pass === 1 ) !== active[ i ] ) {
					continue;
				}
				px = node.x * view.scale + view.x;
				py = node.y * view.scale + view.y;
				if ( px < -20 || py < -20 || px > this.width + 20 || py > this.height + 20 ) {
					continue;
				}
				r = node.radius * Math.min( 1.6, Math.max( 0.6, view.scale ) );
				ctx.globalAlpha = !active[ i ] ? 0.18 : ( sel && !focus[ i ] ? 0.45 : 1 );
				ctx.fillStyle = CONFIDENCE_COLORS[ node.confidence ] || UNKNOWN_COLOR;
				ctx.beginPath();
				ctx.arc( px, py, r, 0, 2 * Math.PI );
				ctx.fill();
				if ( node.standing ) { // superseded or contradicted: a dashed amber ring
					ctx.save();
					ctx.setLineDash( [ 3, 2 ] );
					ctx.lineWidth = 2;
					ctx.strokeStyle = '#f0a020';
					ctx.beginPath();
					ctx.arc( px, py, r + 3, 0, 2 * Math.PI );
					ctx.stroke();
					ctx.restore();
					ctx.beginPath();
					ctx.arc( px, py, r, 0, 2 * Math.PI );
				}
				if ( i === this.selected || i === this.hover || ( this.results && Object.prototype.hasOwnProperty.call( this.results.set, i ) ) ) {
					ctx.globalAlpha = 1;
					ctx.lineWidth = i === this.selected ? 3 : 1.5;
					ctx.strokeStyle = i === this.selected ? '#ffffff' : '#dfe5ff';
					ctx.stroke();
				}
			}
		}
		ctx.globalAlpha = 1;
		this.drawLabels( active, focus, sel );
	};

	GraphView.prototype.arrow = function ( from, to, color ) {
		var view = this.view;
		var ax = from.x * view.scale + view.x;
		var ay = from.y * view.scale + view.y;
		var bx = to.x * view.scale + view.x;
		var by = to.y * view.scale + view.y;
		var dx = bx - ax, dy = by - ay;
		var d = Math.sqrt( dx * dx + dy * dy );
		var r = to.radius * Math.min( 1.6, Math.max( 0.6, view.scale ) ) + 2;
		var ux, uy, tipX, tipY, size = 6;
		if ( d < r + size * 2 ) {
			return;
		}
		ux = dx / d;
		uy = dy / d;
		tipX = bx - ux * r;
		tipY = by - uy * r;
		this.ctx.fillStyle = color;
		this.ctx.beginPath();
		this.ctx.moveTo( tipX, tipY );
		this.ctx.lineTo( tipX - ux * size - uy * size * 0.55, tipY - uy * size + ux * size * 0.55 );
		this.ctx.lineTo( tipX - ux * size + uy * size * 0.55, tipY - uy * size - ux * size * 0.55 );
		this.ctx.closePath();
		this.ctx.fill();
	};

	/** Labels: connected Lessons from the start, plus results, selection, hover and filter matches; no overlaps. */
	GraphView.prototype.drawLabels = function ( active, focus, sel ) {
		var ctx = this.ctx;
		var nodes = this.model.nodes;
		var view = this.view;
		var candidates = [];
		var occupied = {};
		var cellW = 24, cellH = 14;
		var i, node, priority, count = 0, px, py, w, x0, x1, y0, y1, cx, cy, free, text;
		for ( i = 0; i < nodes.length; i++ ) {
			node = nodes[ i ];
			priority = -1;
			if ( i === this.selected ) {
				priority = 1e9;
			} else if ( i === this.hover ) {
				priority = 1e8;
			} else if ( this.results && Object.prototype.hasOwnProperty.call( this.results.set, i ) ) {
				priority = 1e7 - this.results.set[ i ];
			} else if ( sel && focus[ i ] ) {
				priority = 1e6 + node.degree;
			} else if ( active[ i ] && !this.results && ( node.degree > 0 || this.titleFilter || view.scale > 2.2 ) ) {
				priority = node.degree + ( this.titleFilter ? 1000 : 0 );
			}
			if ( priority >= 0 ) {
				candidates.push( { i: i, p: priority } );
			}
		}
		candidates.sort( function ( p, q ) {
			return q.p - p.p;
		} );
		ctx.font = LABEL_FONT;
		ctx.textBaseline = 'middle';
		ctx.lineJoin = 'round';
		this.visibleLabels = 0;
		for ( var k = 0; k < candidates.length && count < MAX_LABELS; k++ ) {
			node = nodes[ candidates[ k ].i ];
			px = node.x * view.scale + view.x;
			py = node.y * view.scale + view.y;
			if ( px < -100 || py < -20 || px > this.width + 20 || py > this.height + 20 ) {
				continue;
			}
			text = candidates[ k ].i === this.selected || candidates[ k ].i === this.hover ? clip( node.title, 60 ) : node.label;
			w = ctx.measureText( text ).width;
			x0 = Math.floor( ( px + 8 ) / cellW );
			x1 = Math.floor( ( px + 10 + w ) / cellW );
			y0 = Math.floor( ( py - 7 ) / cellH );
			y1 = Math.floor( ( py + 7 ) / cellH );
			free = true;
			for ( cx = x0; cx <= x1 && free; cx++ ) {
				for ( cy = y0; cy <= y1; cy++ ) {
					if ( occupied[ cx + ',' + cy ] ) {
						free = false;
						break;
					}
				}
			}
			if ( !free && candidates[ k ].p < 1e6 ) {
				continue;
			}
			for ( cx = x0; cx <= x1; cx++ ) {
				for ( cy = y0; cy <= y1; cy++ ) {
					occupied[ cx + ',' + cy ] = true;
				}
			}
			ctx.globalAlpha = active[ node.index ] || candidates[ k ].p >= 1e6 ? 1 : 0.5;
			ctx.lineWidth = 3;
			ctx.strokeStyle = 'rgba(12,16,32,0.9)';
			ctx.strokeText( text, px + 9, py );
			ctx.fillStyle = candidates[ k ].i === this.selected ? '#ffffff' : '#dce2f7';
			ctx.fillText( text, px + 9, py );
			count++;
		}
		ctx.globalAlpha = 1;
		this.visibleLabels = count;
		this.root.setAttribute( 'data-visible-labels', String( count ) );
	};

	/** Screen position (relative to the canvas) of a Lesson, for tests and the benchmark. */
	GraphView.prototype.screenPosition = function ( id ) {
		var index = this.model.index[ bareId( id ) ];
		var node = index === undefined ? null : this.model.nodes[ index ];
		return node ? { x: node.x * this.view.scale + this.view.x, y: node.y * this.view.scale + this.view.y } : null;
	};

	// ------------------------------------------------------------- home: search

	function SearchPanel( root, getGraph ) {
		this.root = root;
		this.getGraph = getGraph;
		this.sequence = 0;
		this.build();
	}

	SearchPanel.prototype.build = function () {
		var self = this;
		var examples = [ el( 'span', null, '이렇게 물어보세요' ) ];
		var i;
		this.input = el( 'input', {
			id: 's3rm-search-input',
			className: 's3rm-semantic-input',
			type: 'search',
			name: 'q',
			maxlength: '500',
			autocomplete: 'off',
			placeholder: '예: 체크포인트를 저장하다가 디스크가 가득 찬 적이 있나요?'
		} );
		this.submit = el( 'button', { type: 'submit', id: 's3rm-search-submit', className: 's3rm-semantic-submit' }, '찾기' );
		this.form = el( 'form', { id: 's3rm-search-form', className: 's3rm-semantic-form', role: 'search' }, [
			el( 'label', { 'for': 's3rm-search-input', className: 's3rm-semantic-label' }, '무엇이 궁금한가요? 문장으로 물어보세요' ),
			el( 'div', { className: 's3rm-semantic-row' }, [ this.input, this.submit ] )
		] );
		for ( i = 0; i < SEARCH_EXAMPLES.length; i++ ) {
			examples.push( el( 'button', { type: 'button', className: 's3rm-semantic-example' }, SEARCH_EXAMPLES[ i ] ) );
		}
		this.clearButton = el( 'button', { type: 'button', id: 's3rm-search-clear', className: 's3rm-search-clear' }, '검색 결과 해제' );
		this.heading = el( 'strong', { id: 's3rm-search-heading' } );
		this.mode = el( 'span', { id: 's3rm-search-mode', className: 's3rm-semantic-mode' } );
		this.note = el( 'p', { className: 's3rm-semantic-graph-note' } );
		this.list = el( 'ol', { id: 's3rm-search-results', className: 's3rm-semantic-results' } );
		this.feedback = el( 'div', { id: 's3rm-search-feedback', className: 's3rm-semantic-feedback', hidden: true, 'aria-live': 'polite' }, [
			el( 'div', { className: 's3rm-semantic-result-header' }, [ this.heading, this.mode, this.clearButton ] ),
			this.note,
			this.list
		] );
		clear( this.root );
		this.root.appendChild( this.form );
		this.root.appendChild( el( 'div', { className: 's3rm-semantic-examples' }, examples ) );
		this.root.appendChild( this.feedback );

		this.form.addEventListener( 'submit', function ( event ) {
			event.preventDefault();
			self.run( self.input.value );
		} );
		this.root.addEventListener( 'click', function ( event ) {
			if ( event.target && event.target.className === 's3rm-semantic-example' ) {
				self.input.value = event.target.textContent;
				self.run( self.input.value );
			}
		} );
		this.clearButton.addEventListener( 'click', function () {
			self.reset();
			self.input.focus();
		} );
		this.input.addEventListener( 'keydown', function ( event ) {
			if ( event.key === 'Escape' && !self.feedback.hidden ) {
				self.reset();
			}
		} );
	};

	SearchPanel.prototype.show = function ( heading, note ) {
		this.feedback.hidden = false;
		this.heading.textContent = heading;
		this.note.textContent = note || '';
		this.note.hidden = !note;
	};

	SearchPanel.prototype.reset = function () {
		var graph = this.getGraph();
		this.sequence++;
		this.feedback.hidden = true;
		clear( this.list );
		this.mode.textContent = '';
		this.submit.disabled = false;
		this.root.removeAttribute( 'data-state' );
		if ( graph ) {
			graph.clearResults();
		}
	};

	SearchPanel.prototype.run = function ( text ) {
		var self = this;
		var query = String( text || '' ).trim().slice( 0, 500 );
		var sequence = ++this.sequence;
		if ( !query ) {
			this.show( '찾을 내용을 입력하세요.', '' );
			clear( this.list );
			return Promise.resolve( null );
		}
		this.submit.disabled = true;
		this.root.setAttribute( 'data-state', 'searching' );
		this.show( '찾는 중입니다…', '' );
		this.mode.textContent = '';
		clear( this.list );
		return callTool( 'search_lessons', { query: query, limit: SEARCH_LIMIT, retrieval_mode: 'hybrid_v1' } ).then( null, function ( error ) {
			// a server without hybrid_v1 in its schema: ask again in the default mode
			if ( error && ( error.code === 'rpc_-32602' || error.code === 'invalid_input' || error.code === 'invalid_arguments' ) ) {
				return callTool( 'search_lessons', { query: query, limit: SEARCH_LIMIT } );
			}
			throw error;
		} ).then( function ( content ) {
			if ( sequence !== self.sequence ) {
				return;
			}
			self.render( query, content );
		}, function ( error ) {
			if ( sequence !== self.sequence ) {
				return;
			}
			self.submit.disabled = false;
			self.root.setAttribute( 'data-state', 'error' );
			self.show( '검색하지 못했습니다', describeFailure( error ) );
		} );
	};

	SearchPanel.prototype.render = function ( query, content ) {
		var items = resultItems( content ).slice( 0, 20 );
		var graph = this.getGraph();
		var ids = [];
		var placed = 0;
		var effective = content && content.effective_mode;
		var status = content && content.semantic_status;
		var i, item, id;
		this.submit.disabled = false;
		this.root.setAttribute( 'data-state', items.length ? 'results' : 'empty' );
		this.mode.textContent = effective === 'hybrid_v1' ? '의미 검색 함께 사용' : ( effective ? '전체 텍스트 검색' : '' );
		this.mode.title = effective ? 'effective_mode=' + effective + ( status ? ', semantic_status=' + status : '' ) : '';
		for ( i = 0; i < items.length; i++ ) {
			item = items[ i ] || {};
			id = bareId( item.id || item.lesson_id || '' );
			if ( !id ) {
				continue;
			}
			ids.push( id );
			this.list.appendChild( el( 'li', { className: 's3rm-semantic-result', 'data-id': id }, [
				el( 'div', { className: 's3rm-semantic-result-top' }, [
					el( 'a', { href: lessonUrl( id ), className: 's3rm-semantic-result-link' }, clip( item.title || id, 120 ) ),
					confidenceBadge( item.confidence ),
					standingBadge( item.standing )
				] ),
				idEl( id ),
				item.reusable_lesson ? el( 'p', null, clip( item.reusable_lesson, 160 ) ) : null
			] ) );
		}
		if ( graph ) {
			placed = graph.showResults( ids );
		}
		if ( !ids.length ) {
			this.show( '“' + clip( query, 40 ) + '”에 맞는 메모를 찾지 못했습니다.', '다른 표현이나 증상, 오류 메시지로 다시 찾아보세요. 없다면 새 메모로 남겨 주세요.' );
			return;
		}
		this.show( '관련 메모 ' + ids.length + '건',
			graph ? ( placed === ids.length ? '결과는 그래프 가운데에 모였고, 나머지 메모는 흐리게 보입니다.' :
				'결과는 그래프 가운데에 모였습니다. ' + ( ids.length - placed ) + '건은 그래프에 아직 없어 목록에만 보입니다.' ) : '' );
	};

	// ------------------------------------------------------- home: recent list

	function renderRecent( root, items, failed ) {
		var list, i, item, id;
		clear( root );
		root.setAttribute( 'data-state', failed ? 'error' : ( items.length ? 'ready' : 'empty' ) );
		if ( failed ) {
			root.appendChild( el( 'div', { className: 's3rm-empty-state' }, [
				'최근 메모를 불러오지 못했습니다. ',
				el( 'a', { href: mw.util.getUrl( 'Special:AllPages', { namespace: '3000' } ) }, '모든 메모' ),
				' 목록에서 찾아보세요.'
			] ) );
			return;
		}
		if ( !items.length ) {
			root.appendChild( el( 'div', { className: 's3rm-empty-state' }, [
				'아직 메모가 없습니다. ',
				el( 'a', { href: '#create-a-lesson' }, '첫 메모를 남겨 보세요.' )
			] ) );
			return;
		}
		list = el( 'ul', { className: 's3rm-recent-items' } );
		for ( i = 0; i < items.length && i < RECENT_LIMIT; i++ ) {
			item = items[ i ];
			id = bareId( item.id );
			list.appendChild( el( 'li', { className: 's3rm-summary-row', 'data-id': id }, [
				el( 'span', { className: 's3rm-summary-title' }, el( 'a', { href: lessonUrl( id ) }, clip( item.title || id, 120 ) ) ),
				' ',
				confidenceBadge( item.confidence ),
				' ',
				idEl( id ),
				' ',
				item.updated_at ? timeEl( item.updated_at, '수정 ', 's3rm-summary-updated' ) : null
			] ) );
		}
		root.appendChild( list );
	}

	function fillRecent( root, graphData ) {
		var nodes = graphData && Array.isArray( graphData.nodes ) ? graphData.nodes.slice( 0, MAX_NODES ) : null;
		if ( nodes && !graphData.truncated ) {
			nodes.sort( function ( a, b ) {
				var x = String( a.updated_at || '' ), y = String( b.updated_at || '' );
				return x < y ? 1 : ( x > y ? -1 : 0 );
			} );
			renderRecent( root, nodes.slice( 0, RECENT_LIMIT ), false );
			return Promise.resolve();
		}
		// no graph (or a cut one): the newest Lessons straight from search_lessons
		return callTool( 'search_lessons', { query: '', limit: RECENT_LIMIT, fields: [ 'id', 'title', 'confidence', 'updated_at' ] } ).then( function ( content ) {
			var items = resultItems( content ).map( function ( item ) {
				return { id: item.id, title: item.title, confidence: item.confidence, updated_at: item.updated_at };
			} );
			renderRecent( root, items, false );
		}, function () {
			renderRecent( root, [], true );
		} );
	}

	// ------------------------------------------------------ home: id launcher

	function validateLessonId( raw ) {
		var value = String( raw || '' ).trim();
		if ( !value ) {
			return '문서 ID를 입력하세요.';
		}
		if ( /^lesson:/i.test( value ) ) {
			return '앞의 “Lesson:”은 빼고 ID만 입력하세요. 이름공간은 자동으로 붙습니다.';
		}
		if ( /\s/.test( value ) ) {
			return '빈칸은 쓸 수 없습니다. 낱말 사이는 밑줄(_)이나 하이픈(-)으로 이으세요.';
		}
		if ( /[A-Z]/.test( value ) ) {
			return '대문자는 쓸 수 없습니다. 영문 소문자로 바꿔 주세요.';
		}
		if ( value.length > ID_MAX_LENGTH ) {
			return '문서 ID는 ' + ID_MAX_LENGTH + '자를 넘을 수 없습니다.';
		}
		if ( /^[a-z0-9_-]+$/.test( value ) && !ID_PATTERN.test( value ) ) {
			return '밑줄(_)은 맨 앞이나 맨 끝에 쓰거나 두 개를 잇달아 쓸 수 없습니다. 위키가 문서 이름에서 지우거나 하나로 합쳐 다른 ID가 됩니다.';
		}
		if ( !ID_PATTERN.test( value ) ) {
			return '영문 소문자(a–z), 숫자(0–9), 밑줄(_), 하이픈(-)만 쓸 수 있습니다.';
		}
		return '';
	}

	function buildCreateForm( root ) {
		var input = el( 'input', {
			id: 's3rm-create-id',
			className: 's3rm-create-input',
			type: 'text',
			name: 'lesson-id',
			placeholder: 'gpu_allocator_fragmentation',
			maxlength: String( ID_MAX_LENGTH + 20 ),
			autocomplete: 'off',
			autocapitalize: 'none',
			spellcheck: 'false',
			'aria-describedby': 's3rm-create-message',
			'aria-label': '새 메모의 문서 ID'
		} );
		// what the wiki actually allows this reader (anonymous editing may be on): decided by the
		// wiki's own rights list; until it answers, a logged-in reader may write and others log in first
		var canWrite = !!mw.config.get( 'wgUserName' );
		var button = el( 'button', { type: 'submit', id: 's3rm-create-submit', className: 's3rm-create-submit' }, canWrite ? '쓰기 시작' : '로그인하고 쓰기' );
		var message = el( 'p', { id: 's3rm-create-message', className: 's3rm-create-message', role: 'status' },
			'영문 소문자, 숫자, _, - 만 씁니다. “Lesson:”은 붙이지 않습니다.' );
		var form = el( 'form', { id: 's3rm-create-launcher', className: 's3rm-create-launcher', novalidate: true }, [
			el( 'div', { className: 's3rm-create-row' }, [ input, button ] ),
			message
		] );
		var busy = false;

		function setMessage( text, isError ) {
			message.textContent = '';
			if ( typeof text === 'string' ) {
				message.textContent = text;
			} else {
				message.appendChild( text );
			}
			message.className = 's3rm-create-message' + ( isError ? ' is-error' : '' );
			input.setAttribute( 'aria-invalid', isError ? 'true' : 'false' );
			form.setAttribute( 'data-state', isError ? 'invalid' : 'ok' );
		}

		function target( id ) {
			var query = { action: 'edit', preload: PRELOAD_PAGE };
			if ( canWrite ) {
				return lessonUrl( id, query );
			}
			return mw.util.getUrl( 'Special:UserLogin', { returnto: LESSON_NS + ':' + id, returntoquery: 'action=edit&preload=' + encodeURIComponent( PRELOAD_PAGE ) } );
		}

		function existsMessage( id ) {
			return el( 'span', null, [
				'이미 같은 ID의 메모가 있습니다: ',
				el( 'a', { href: lessonUrl( id ) }, LESSON_NS + ':' + id ),
				'. 다른 ID를 고르거나 그 메모를 고쳐 주세요.'
			] );
		}

		// "available" is said only after the wiki confirmed the id is free; a later keystroke
		// makes an earlier answer stale (checkSeq), and a short pause batches fast typing
		var checkSeq = 0;
		var checkTimer = null;
		input.addEventListener( 'input', function () {
			var id = input.value.trim();
			var problem = input.value ? validateLessonId( input.value ) : '';
			var seq = ++checkSeq;
			clearTimeout( checkTimer );
			if ( problem || !id ) {
				setMessage( problem || '영문 소문자, 숫자, _, - 만 씁니다. “Lesson:”은 붙이지 않습니다.', !!problem );
				return;
			}
			setMessage( '같은 ID의 메모가 있는지 확인하는 중입니다: Lesson:' + id, false );
			form.setAttribute( 'data-state', 'checking' );
			checkTimer = setTimeout( function () {
				lessonExists( id ).then( function ( exists ) {
					if ( seq === checkSeq ) {
						setMessage( exists ? existsMessage( id ) : '쓸 수 있는 ID입니다: Lesson:' + id, exists );
					}
				}, function () {
					if ( seq === checkSeq ) {
						setMessage( '형식은 맞습니다: Lesson:' + id + ' (같은 ID가 있는지는 확인하지 못했습니다)', false );
					}
				} );
			}, 250 );
		} );
		form.addEventListener( 'submit', function ( event ) {
			var id = input.value.trim();
			var problem = validateLessonId( id );
			event.preventDefault();
			if ( problem ) {
				setMessage( problem, true );
				input.focus();
				return;
			}
			if ( busy ) {
				return;
			}
			busy = true;
			button.disabled = true;
			setMessage( '같은 ID의 메모가 있는지 확인하는 중입니다…', false );
			checkSeq++;
			clearTimeout( checkTimer );
			lessonExists( id ).then( function ( exists ) {
				busy = false;
				button.disabled = false;
				if ( exists ) {
					setMessage( existsMessage( id ), true );
					return;
				}
				window.location.href = target( id );
			}, function () {
				// the check is a courtesy: go ahead if the wiki API did not answer
				busy = false;
				button.disabled = false;
				window.location.href = target( id );
			} );
		} );
		clear( root );
		root.appendChild( form );
		root.setAttribute( 'data-rights', 'pending' );
		return mw.loader.using( 'mediawiki.user' ).then( function () {
			return mw.user.getRights();
		} ).then( function ( rights ) {
			rights = rights || [];
			canWrite = rights.indexOf( 'edit' ) !== -1 && rights.indexOf( 'createpage' ) !== -1;
			button.textContent = canWrite ? '쓰기 시작' : '로그인하고 쓰기';
			root.setAttribute( 'data-rights', canWrite ? 'write' : 'login' );
		}, function () {
			root.setAttribute( 'data-rights', 'unknown' );
		} ).then( function () {
			root.setAttribute( 'data-state', 'ready' );
		} );
	}

	// ------------------------------------------------- Lesson page: digests

	function findList( content, names ) {
		var i, value;
		for ( i = 0; i < names.length; i++ ) {
			value = content && content[ names[ i ] ];
			if ( Array.isArray( value ) ) {
				return value;
			}
			if ( value && Array.isArray( value.items ) ) {
				return value.items;
			}
		}
		return [];
	}

	function findCursor( content ) {
		var c = content && content.citations;
		return ( c && !Array.isArray( c ) && c.next_cursor ) || ( content && ( content.citations_next_cursor || content.citations_cursor ) ) || null;
	}

	function fillDigests( holders ) {
		var lessonId = String( mw.config.get( 'wgPageName' ) || '' ).replace( /^[^:]*:/, '' );
		var wanted = {};
		var missing = 0;
		var i, key;
		for ( i = 0; i < holders.length; i++ ) {
			key = holders[ i ].getAttribute( 'data-evidence-id' ) || '';
			( wanted[ key ] = wanted[ key ] || [] ).push( holders[ i ] );
			holders[ i ].setAttribute( 'data-state', 'loading' );
			holders[ i ].textContent = 'digest 불러오는 중…';
			missing++;
		}

		function put( id, digest ) {
			var list = wanted[ id ] || [];
			var j, copy;
			for ( j = 0; j < list.length; j++ ) {
				if ( list[ j ].getAttribute( 'data-state' ) === 'ready' ) {
					continue;
				}
				list[ j ].textContent = digest;
				copy = el( 'button', { type: 'button', className: 's3rm-digest-copy', 'data-digest': digest, title: '검증 기록에 붙여 넣을 digest를 복사합니다' }, '복사' );
				list[ j ].parentNode.insertBefore( copy, list[ j ].nextSibling );
				list[ j ].setAttribute( 'data-state', 'ready' );
				missing--;
			}
		}

		function page( cursor, round ) {
			// get_lesson: citations come as an independent cursor page (max 20 per page)
			var args = { id: lessonId, fields: [ 'title' ], citations_limit: 20 };
			if ( cursor ) {
				args.citations_cursor = cursor;
			}
			return callTool( 'get_lesson', args ).then( function ( content ) {
				var items = findList( content, [ 'citations', 'evidence' ] );
				var j, item, next;
				for ( j = 0; j < items.length; j++ ) {
					item = items[ j ] || {};
					if ( item.id && ( item.digest || item.evidence_digest ) ) {
						put( String( item.id ), String( item.digest || item.evidence_digest ) );
					}
				}
				next = findCursor( content );
				if ( missing > 0 && next && round + 1 < MAX_DIGEST_PAGES ) {
					return page( next, round + 1 );
				}
			} );
		}

		document.addEventListener( 'click', function ( event ) {
			var target = event.target;
			var digest = target && target.getAttribute && target.getAttribute( 'data-digest' );
			if ( !digest ) {
				return;
			}
			if ( navigator.clipboard && navigator.clipboard.writeText ) {
				navigator.clipboard.writeText( digest ).then( function () {
					target.textContent = '복사됨';
				}, function () {
					target.textContent = '직접 선택해 복사하세요';
				} );
			}
		} );

		return page( null, 0 ).then( null, function () {} ).then( function () {
			var k, j;
			for ( k in wanted ) {
				for ( j = 0; j < wanted[ k ].length; j++ ) {
					if ( wanted[ k ][ j ].getAttribute( 'data-state' ) !== 'ready' ) {
						wanted[ k ][ j ].setAttribute( 'data-state', 'error' );
						wanted[ k ][ j ].textContent = 'digest를 불러오지 못했습니다. get_lesson으로 확인하세요.';
					}
				}
			}
		} );
	}

	// ------------------------------------------------------------- wiring

	function initHome( graphRoot, earlyGraph ) {
		var api = { graph: null, search: null, data: null, buildModel: buildModel };
		var searchRoot = document.getElementById( 's3rm-semantic-search' );
		var recentRoot = document.getElementById( 's3rm-recent-list' );
		var ready, recentFilled = null;
		mw.s3rm = mw.s3rm || {};
		mw.s3rm.home = api;
		mw.s3rm.mcpUrl = mcpUrl();
		if ( searchRoot ) {
			api.search = new SearchPanel( searchRoot, function () {
				return api.graph;
			} );
		}
		graphRoot.setAttribute( 'data-state', 'loading' );
		ready = ( earlyGraph || fetchGraph() ).then( function ( data ) {
			var model;
			mark( 's3rm-graph-data' );
			api.data = data;
			model = buildModel( data );
			graphRoot.setAttribute( 'data-node-count', String( model.nodes.length ) );
			graphRoot.setAttribute( 'data-edge-count', String( model.edges.length ) );
			if ( !model.nodes.length ) {
				clear( graphRoot );
				graphRoot.appendChild( el( 'div', { className: 's3rm-graph-empty' }, [
					el( 'strong', null, '아직 그래프에 보일 메모가 없습니다' ),
					el( 'p', null, [ '첫 메모를 ', el( 'a', { href: '#create-a-lesson' }, '여기에서 남겨 보세요' ), '.' ] )
				] ) );
				graphRoot.setAttribute( 'data-state', 'empty' );
			} else {
				api.graph = new GraphView( graphRoot, model );
				graphRoot.setAttribute( 'data-state', 'ready' );
			}
			mark( 's3rm-graph-interactive' );
			return data;
		}, function ( error ) {
			var retry = el( 'button', { type: 'button', className: 's3rm-graph-button s3rm-graph-button-wide', id: 's3rm-graph-retry' }, '다시 시도' );
			clear( graphRoot );
			graphRoot.appendChild( el( 'div', { className: 's3rm-graph-empty s3rm-graph-error' }, [
				el( 'strong', null, '그래프를 불러오지 못했습니다' ),
				el( 'p', null, describeFailure( error ) ),
				retry
			] ) );
			graphRoot.setAttribute( 'data-state', 'error' );
			retry.addEventListener( 'click', function () {
				window.location.reload();
			} );
			mark( 's3rm-graph-interactive' );
			return null;
		} );
		api.ready = ready;
		if ( recentRoot ) {
			recentFilled = ready.then( function ( data ) {
				return fillRecent( recentRoot, data );
			} );
		}
		// what can still move the graph on the page after it is drawn: the fonts (Korean glyphs change
		// the text's size above and beside it) and the recent list filling in
		ready.then( function () {
			if ( api.graph ) {
				api.graph.holdSettle( document.fonts ? document.fonts.ready : null );
				api.graph.holdSettle( recentFilled );
			}
		} );
	}

	// ---- Page Forms: hidden provenance and time fields (docs/data-contract.md#browser-forms)
	// Page Forms' own "now" default writes local time, not UTC ISO-8601, so the
	// form leaves these inputs empty (sync/pages/forms.py BROWSER_FILLED) and this
	// code fills them just before the form is submitted. Account fields use Page
	// Forms' "current user" default; the save-hook auditor checks everything.
	var ISO_SECOND = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

	function isoSecond( ms ) {
		return new Date( ms ).toISOString().replace( /\.\d{3}Z$/, 'Z' );
	}

	function formFields( form, pattern ) {
		return Array.prototype.filter.call( form.querySelectorAll( 'input, select, textarea' ), function ( el ) {
			var name = el.name || '';
			return pattern.test( name ) && name.indexOf( '[num]' ) === -1; // skip the blank-instance starter
		} );
	}

	function formLessonId() {
		var name = String( mw.config.get( 'wgPageName' ) || '' ), at = name.lastIndexOf( 'Lesson:' );
		return at === -1 ? '' : name.slice( at + 7 ).replace( / /g, '_' );
	}

	function lockAfterCreate( form ) {
		Array.prototype.forEach.call( form.querySelectorAll( '.s3rm-lock-after-create' ), function ( el ) {
			var field = /^(input|select|textarea)$/i.test( el.tagName ) ? el : el.querySelector( 'input, select, textarea' );
			if ( !field ) {
				return;
			}
			field.setAttribute( 'aria-readonly', 'true' );
			if ( field.tagName === 'SELECT' ) {
				Array.prototype.forEach.call( field.options, function ( opt ) {
					opt.disabled = !opt.selected; // stays submitted, cannot be changed
				} );
			} else {
				field.readOnly = true;
			}
		} );
	}

	// A relation target is stored as the Lesson id. Page Forms' "values from namespace" picker
	// offers page names ("gpu oom high" for Lesson:gpu_oom_high: PFValuesUtils::getAllPagesForNamespace
	// turns "_" into " ") and submits the chosen name from the input named "Lesson relation[n][to]"
	// (PF_ComboBoxInput.js keeps it in a hidden input); the page name is turned back into the id
	// the way MediaWiki makes a title's key: no namespace prefix, runs of spaces/underscores as one "_".
	function titleToLessonId( raw ) {
		return String( raw || '' ).trim().replace( /^lesson\s*:\s*/i, '' ).replace( /[ _]+/g, '_' ).replace( /^_+|_+$/g, '' );
	}

	function setFieldValue( field, value ) {
		if ( field.tagName === 'SELECT' ) {
			var opt = field.options[ field.selectedIndex ];
			if ( opt ) {
				opt.value = value; // a select2/<select> picker submits the selected option's value
			}
			return;
		}
		field.value = value;
	}

	// ---- Page Forms: field values are data (docs/data-contract.md#codec, docs/browser.md#page-forms)
	// The page stores every value encoded by the page codec (gateway/domain/codec.py): "|" as
	// "&#x7C;" (never "&#124;", which SMW turns back into "|"), a line break as "&#10;" and so on. Page Forms copies a parameter's wikitext into
	// its field as it is, so the form shows those references, and it refuses a bare "|"
	// (PageForms.js checkForPipes, "pf_pipe_error"). The site script decodes the fields when the
	// form opens and encodes them again just before Page Forms validates and submits, with the
	// codec's rules, so a browser editor types plain text and the page holds what an agent writes.
	var CODEC_SCHEMES = [ 'bitcoin', 'ftp', 'ftps', 'geo', 'git', 'gopher', 'http', 'https', 'irc', 'ircs', 'magnet',
		'mailto', 'matrix', 'mms', 'news', 'nntp', 'redis', 'sftp', 'sip', 'sips', 'sms', 'ssh', 'svn', 'tel', 'telnet',
		'urn', 'worldwind', 'xmpp' ];
	var CODEC_ALWAYS = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '|': '&#x7C;', '{': '&#123;', '}': '&#125;', '[': '&#91;', ']': '&#93;' };
	var CODEC_TWIN = '~\'_';
	var CODEC_LEADING = ' *#:;=-';
	var CODEC_TRIM = ' \t\n\r\0\x0b';
	// a name is any run of ASCII letters, digits and non-ASCII characters, as MediaWiki delimits one
	var CODEC_ENTITY = /&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z0-9\u0080-\uFFFF]+);/g;
	// MediaWiki's own right-to-left spellings of &rlm; (codec.NAMED_REFERENCES)
	var CODEC_MW_ALIASES = { '\u05e8\u05dc\u05de': '\u200f', '\u0631\u0644\u0645': '\u200f' };
	var codecMark = null;

	function codePoints( text ) {
		var out = [], i, c, d;
		for ( i = 0; i < text.length; i++ ) {
			c = text.charCodeAt( i );
			if ( c >= 0xD800 && c <= 0xDBFF && i + 1 < text.length ) {
				d = text.charCodeAt( i + 1 );
				if ( d >= 0xDC00 && d <= 0xDFFF ) {
					out.push( text.slice( i, i + 2 ) );
					i++;
					continue;
				}
			}
			out.push( text.charAt( i ) );
		}
		return out;
	}

	function codePointOf( ch ) {
		return ch.length === 2 ? ( ch.charCodeAt( 0 ) - 0xD800 ) * 0x400 + ( ch.charCodeAt( 1 ) - 0xDC00 ) + 0x10000 : ch.charCodeAt( 0 );
	}

	function nfc( text ) {
		return typeof text.normalize === 'function' ? text.normalize( 'NFC' ) : text;
	}

	function isMark( ch ) {
		if ( codecMark === null ) {
			try {
				codecMark = new RegExp( '^\\p{M}$', 'u' );
			} catch ( e ) {
				codecMark = false;
			}
		}
		return codecMark ? codecMark.test( ch ) : false;
	}

	function controlOrNonchar( cp ) {
		return cp < 0x20 || ( cp >= 0x7F && cp <= 0x9F ) || ( cp >= 0xFDD0 && cp <= 0xFDEF ) || ( cp & 0xFFFE ) === 0xFFFE;
	}

	function nfcSensitive( ch ) {
		var cp = codePointOf( ch );
		return isMark( ch ) || ( cp >= 0x1100 && cp <= 0x11FF ) || ( cp >= 0xA960 && cp <= 0xA97F ) ||
			( cp >= 0xD7B0 && cp <= 0xD7FF ) || nfc( ch ) !== ch;
	}

	function afterScheme( chars, i ) {
		var before = chars.slice( Math.max( 0, i - 9 ), i ).join( '' ).toLowerCase(), k, name;
		for ( k = 0; k < CODEC_SCHEMES.length; k++ ) {
			name = CODEC_SCHEMES[ k ];
			if ( before.length >= name.length && before.slice( before.length - name.length ) === name ) {
				return true;
			}
		}
		return false;
	}

	/** The page codec's encode_value: ``value`` as inert wikitext on one line (``url``: scheme colon kept). */
	function encodeValue( value, url ) {
		var chars = codePoints( String( value || '' ) ), out = [], i, ch, cp, last = chars.length - 1, trailingFrom = chars.length;
		var notNfc = nfc( chars.join( '' ) ) !== chars.join( '' );
		while ( trailingFrom > 0 && CODEC_TRIM.indexOf( chars[ trailingFrom - 1 ] ) !== -1 ) {
			trailingFrom--;
		}
		for ( i = 0; i < chars.length; i++ ) {
			ch = chars[ i ];
			cp = codePointOf( ch );
			if ( Object.prototype.hasOwnProperty.call( CODEC_ALWAYS, ch ) ) {
				out.push( CODEC_ALWAYS[ ch ] );
			} else if ( controlOrNonchar( cp ) || ( cp >= 0xD800 && cp <= 0xDFFF ) ) {
				out.push( cp >= 0xD800 && cp <= 0xDFFF ? '&#65533;' : '&#' + cp + ';' ); // a lone surrogate cannot be stored
			} else if ( i === 0 && ( CODEC_LEADING.indexOf( ch ) !== -1 || /^\s$/.test( ch ) || nfcSensitive( ch ) ) ) {
				out.push( '&#' + cp + ';' );
			} else if ( i >= trailingFrom ) {
				out.push( '&#' + cp + ';' );
			} else if ( CODEC_TWIN.indexOf( ch ) !== -1 && ( ( i > 0 && chars[ i - 1 ] === ch ) || ( i < last && chars[ i + 1 ] === ch ) ) ) {
				out.push( '&#' + cp + ';' );
			} else if ( ch === ':' && !url && afterScheme( chars, i ) ) {
				out.push( '&#58;' );
			} else if ( notNfc && nfcSensitive( ch ) ) {
				out.push( '&#' + cp + ';' );
			} else {
				out.push( ch );
			}
		}
		return out.join( '' );
	}

	var codecScratch = null;

	/** The page codec's decode_value: trimmed like a named template parameter, references resolved. */
	function decodeValue( raw ) {
		var text = String( raw || '' ), start = 0, end = text.length;
		while ( start < end && CODEC_TRIM.indexOf( text.charAt( start ) ) !== -1 ) {
			start++;
		}
		while ( end > start && CODEC_TRIM.indexOf( text.charAt( end - 1 ) ) !== -1 ) {
			end--;
		}
		text = text.slice( start, end );
		if ( text.indexOf( '&' ) === -1 ) {
			return text;
		}
		return text.replace( CODEC_ENTITY, function ( whole, body ) {
			var cp;
			if ( body.charAt( 0 ) === '#' ) {
				cp = /^#[xX]/.test( body ) ? parseInt( body.slice( 2 ), 16 ) : parseInt( body.slice( 1 ), 10 );
				if ( cp > 0x10FFFF || ( cp >= 0xD800 && cp <= 0xDFFF ) ) {
					return whole;
				}
				return String.fromCodePoint( cp );
			}
			if ( Object.prototype.hasOwnProperty.call( CODEC_MW_ALIASES, body ) ) {
				return CODEC_MW_ALIASES[ body ];
			}
			// a named reference, resolved by the HTML parser; the text is "&name;" only, in a
			// textarea (RCDATA), in an inert document. Only the whole name with its ";" counts
			// (codec.NAMED_REFERENCES): a legacy prefix ("&copy2024;" read as "©2024;") leaves
			// the rest of the name behind, while every whole name stands for 1-2 UTF-16 units.
			// The line break after <textarea> is the one the parser drops (else &NewLine; would go)
			codecScratch = codecScratch || new DOMParser();
			var named = codecScratch.parseFromString( '<textarea>\n' + whole + '</textarea>', 'text/html' ).querySelector( 'textarea' ).value;
			return named.length <= 2 ? named : whole;
		} );
	}

	var LESSON_TEXT_FIELD = /^Lesson(?: evidence| evidence verification| relation)?\[(?:[^\]]+\]\[)?[a-z_]+\]$/;

	function textFields( form ) {
		return Array.prototype.filter.call( form.querySelectorAll( 'textarea, input[type="text"], input:not([type])' ), function ( el ) {
			return LESSON_TEXT_FIELD.test( el.name || '' ) && el.name.indexOf( '[num]' ) === -1;
		} );
	}

	function isUrlField( el ) {
		return /\[url\]$/.test( el.name );
	}

	// A value the field cannot hold as it is (a one-line input drops line breaks, a textarea turns
	// CR LF into LF) stays in its encoded form, so a save never changes it behind the reader's back.
	function decodeFormFields( form ) {
		textFields( form ).forEach( function ( el ) {
			var raw = el.value, value = decodeValue( raw );
			if ( value === raw ) {
				return;
			}
			el.value = value;
			if ( el.value !== value ) {
				el.value = raw;
				el.setAttribute( 'data-s3rm-raw', raw );
			}
		} );
	}

	// Encodes every text field once per submission; the plain text comes back right after
	// (the browser has taken the form data by then), so a save Page Forms refuses leaves the
	// reader's text as typed and the next submission encodes it afresh.
	function encoderFor( form ) {
		var pending = null;
		return function () {
			if ( pending ) {
				return;
			}
			pending = [];
			textFields( form ).forEach( function ( el ) {
				var plain = el.value, raw = el.getAttribute( 'data-s3rm-raw' ), encoded;
				if ( raw !== null ) {
					// still shown encoded: unchanged it is kept, edited it is read like typed wikitext
					encoded = plain === raw ? raw : encodeValue( decodeValue( plain ), isUrlField( el ) );
				} else {
					encoded = encodeValue( plain, isUrlField( el ) );
				}
				if ( encoded !== plain ) {
					el.value = encoded;
					pending.push( [ el, plain, encoded ] );
				}
			} );
			setTimeout( function () {
				pending.forEach( function ( entry ) {
					if ( entry[ 0 ].value === entry[ 2 ] ) {
						entry[ 0 ].value = entry[ 1 ];
					}
				} );
				pending = null;
			}, 0 );
		};
	}

	// ---- Page Forms: the schema's save rules, checked in the form (docs/browser.md#form-rules)
	// sync/pages/forms.py writes the rules derived from schema/lesson.toml into the form as
	// JSON (#s3rm-form-rules[data-rules]); nothing here repeats a pattern, a limit or an enum.
	function formRules() {
		var holder = document.getElementById( 's3rm-form-rules' );
		try {
			return holder ? JSON.parse( holder.getAttribute( 'data-rules' ) || 'null' ) : null;
		} catch ( e ) {
			return null;
		}
	}

	var PF_NAME = /^(.+?)\[([^\]]+)\](?:\[([^\]]+)\])?(?:\[([^\]]*)\])?$/;

	/**
	 * The form read as records: ``{ lesson: record, evidence: [record], verification: [...],
	 * relation: [...] }``; a record is ``{ kind, key, box, els: {field: [element]} }`` (``box`` the
	 * instance element, ``key`` its Page Forms index). The ``[num]`` starter is left out.
	 */
	function formRecords( form, rules ) {
		var out = { lesson: null, evidence: [], verification: [], relation: [] };
		var byKey = {};
		Array.prototype.forEach.call( form.querySelectorAll( 'input, select, textarea' ), function ( el ) {
			var m = PF_NAME.exec( el.name || '' ), kind, key, field, rec;
			kind = m && rules.templates[ m[ 1 ] ];
			if ( !kind ) {
				return;
			}
			key = kind === 'lesson' ? '' : m[ 2 ];
			field = kind === 'lesson' ? m[ 2 ] : m[ 3 ];
			if ( key === 'num' || !field || m[ 4 ] === 'is_list' ) {
				return;
			}
			rec = byKey[ kind + '\u0000' + key ];
			if ( !rec ) {
				rec = byKey[ kind + '\u0000' + key ] = { kind: kind, key: key, els: {},
					box: el.closest ? el.closest( '.multipleTemplateInstance' ) : null };
				if ( kind === 'lesson' ) {
					out.lesson = rec;
				} else {
					out[ kind ].push( rec );
				}
			}
			( rec.els[ field ] = rec.els[ field ] || [] ).push( el );
		} );
		return out;
	}

	/** The value a record's field would be saved with (plain text; a checkbox list joined by ","). */
	function fieldValue( rec, name ) {
		var els = rec.els[ name ] || [], raw;
		if ( !els.length ) {
			return '';
		}
		if ( els[ 0 ].type === 'checkbox' ) {
			return els.filter( function ( e ) {
				return e.checked;
			} ).map( function ( e ) {
				return e.value;
			} ).join( ',' );
		}
		raw = els[ 0 ].getAttribute( 'data-s3rm-raw' );
		return raw !== null && els[ 0 ].value === raw ? decodeValue( raw ) : els[ 0 ].value;
	}

	function listItems( value ) {
		return String( value || '' ).split( ',' ).map( function ( s ) {
			return s.trim();
		} ).filter( Boolean );
	}

	function codePointLength( text ) {
		return codePoints( String( text ) ).length;
	}

	function isHttpUrl( value, schemes ) {
		var u;
		if ( /[\s\u0000-\u001f\u007f]/.test( value ) ) {
			return false;
		}
		try {
			u = new URL( value );
		} catch ( e ) {
			return false;
		}
		return schemes.indexOf( u.protocol.replace( /:$/, '' ).toLowerCase() ) !== -1 && !!u.hostname;
	}

	function suggestId( value ) {
		return String( value ).toLowerCase().replace( /[^a-z0-9_-]+/g, '_' ).replace( /^_+|_+$/g, '' );
	}

	var RECORD_WORDS = { lesson: '메모', evidence: '근거 자료', verification: '근거 검증 기록', relation: '관계' };

	/** Problems of one field value by the schema's definition (empty list when fine). */
	function valueProblems( def, kind, value, rules, isNew ) {
		var out = [], label = '‘' + def.label + '’', items, bad;
		if ( !value ) {
			return out;
		}
		if ( def.max_length && codePointLength( value ) > def.max_length ) {
			out.push( label + '은(는) ' + def.max_length + '자까지 쓸 수 있습니다(지금 ' + codePointLength( value ) + '자).' );
		}
		if ( def.type === 'enum' ) {
			if ( def.values.indexOf( value ) === -1 ) {
				out.push( label + '에 양식이 모르는 값 “' + value + '”이 있습니다.' );
			} else if ( isNew && def.new_values.indexOf( value ) === -1 ) {
				out.push( label + '에서 “' + ( def.labels[ value ] || value ) + '”은(는) 새 기록에 고를 수 없습니다.' );
			}
		} else if ( def.type === 'enum_list' ) {
			items = listItems( value );
			bad = items.filter( function ( v ) {
				return def.values.indexOf( v ) === -1 || ( isNew && def.new_values.indexOf( v ) === -1 );
			} );
			if ( bad.length ) {
				out.push( label + '에 고를 수 없는 값이 있습니다: ' + bad.join( ', ' ) );
			}
		} else if ( def.type === 'id' ) {
			if ( !new RegExp( kind === 'relation' ? rules.patterns.id : rules.patterns.record_id ).test( value ) ||
				( kind === 'relation' && value.length > rules.patterns.id_max_length ) ) {
				out.push( label + ' “' + value + '”은(는) 쓸 수 없습니다. 영문 소문자, 숫자, 밑줄(_), 하이픈(-)만 씁니다' +
					( suggestId( value ) ? ' (예: ' + suggestId( value ) + ').' : '.' ) );
			}
		} else if ( def.type === 'url' ) {
			if ( !isHttpUrl( value, rules.url_schemes ) ) {
				out.push( label + '은(는) ' + rules.url_schemes.join( ':// 또는 ' ) + '://로 시작하고 호스트가 있는 주소여야 하며, ' +
					'빈칸은 넣을 수 없습니다(빈칸은 %20으로 적습니다).' );
			}
		} else if ( def.type === 'sha256' || def.type === 'digest' ) {
			if ( !new RegExp( rules.patterns[ def.type ] ).test( value ) ) {
				out.push( label + '의 형식이 맞지 않습니다: ' + ( def.type === 'digest' ? 'sha256: 뒤에 ' : '' ) + '소문자 16진수 64자입니다.' );
			}
		}
		return out;
	}

	/**
	 * The rules of schema/lesson.toml and hooks_spec/rules.md a form save can break, checked on the
	 * values about to be saved: ``[{ el, text }]``. ``state`` holds what the form opened with
	 * (``existing``, ``loaded`` Lesson values, ``locked`` stored records).
	 */
	function checkLessonForm( form, rules, state ) {
		var recs = formRecords( form, rules ), problems = [], lesson = recs.lesson;
		var conf = rules.confidence, claimLabels, evidenceIds = {}, lessonId = formLessonId(), seen = {};
		function add( el, text ) {
			problems.push( { el: el, text: text } );
		}
		function fieldsOf( rec, only ) {
			var defs = rules.fields[ rec.kind ], name;
			for ( name in rec.els ) {
				if ( !defs[ name ] || ( defs[ name ].settable !== 'client' && defs[ name ].settable !== 'origin' ) ) {
					continue;
				}
				if ( only && !only( name ) ) {
					continue;
				}
				valueProblems( defs[ name ], rec.kind, rec.kind === 'relation' && name === 'to' ? titleToLessonId( fieldValue( rec, name ) ) :
					fieldValue( rec, name ), rules, !state.existing || rec.kind !== 'lesson' ).forEach( function ( text ) {
					add( rec.els[ name ][ 0 ], text );
				} );
			}
		}
		// stored records: unchanged, still there, and holding values the form can show
		state.locked.forEach( function ( entry ) {
			if ( !entry.box.isConnected ) {
				add( null, '저장된 ' + RECORD_WORDS[ entry.kind ] + ' 기록(' + ( entry.id || entry.key ) + ')이 양식에서 지워졌습니다. ' +
					'저장된 기록은 지우거나 고칠 수 없습니다. 양식을 다시 열어 주세요.' );
			} else if ( recordSnapshot( entry.box ) !== entry.snapshot ) {
				add( entry.box, '저장된 ' + RECORD_WORDS[ entry.kind ] + ' 기록(' + ( entry.id || entry.key ) + ')이 바뀌었습니다. ' +
					'저장된 기록은 고칠 수 없습니다. 바로잡으려면 새 기록을 덧붙이세요.' );
			}
		} );
		state.unknown.forEach( function ( entry ) {
			add( entry.el, entry.text );
		} );
		if ( lesson ) {
			fieldsOf( lesson, function ( name ) {
				return !state.existing || fieldValue( lesson, name ) !== state.loaded[ name ];
			} );
		}
		[ 'evidence', 'verification', 'relation' ].forEach( function ( kind ) {
			recs[ kind ].forEach( function ( rec ) {
				if ( !isLocked( rec.box ) ) {
					fieldsOf( rec );
				}
			} );
		} );
		// ids unique (HS24), verification names an evidence on the page (HS28)
		recs.evidence.forEach( function ( rec ) {
			var id = fieldValue( rec, 'id' );
			if ( id && evidenceIds[ id ] && !isLocked( rec.box ) ) {
				add( rec.els.id[ 0 ], '자료 ID “' + id + '”은(는) 이 메모에 이미 있습니다. 다른 ID를 쓰세요.' );
			}
			evidenceIds[ id ] = true;
		} );
		recs.verification.forEach( function ( rec ) {
			var id = fieldValue( rec, 'evidence_id' );
			if ( id && !isLocked( rec.box ) && !evidenceIds[ id ] ) {
				add( rec.els.evidence_id[ 0 ], '검사한 자료 ID “' + id + '”인 근거 자료가 이 메모에 없습니다.' );
			}
		} );
		// relations: not to itself (HS36), not twice (HS35)
		recs.relation.forEach( function ( rec ) {
			var to = titleToLessonId( fieldValue( rec, 'to' ) ), key = fieldValue( rec, 'relation' ) + ' ' + to;
			if ( to && to === lessonId ) {
				add( rec.els.to[ 0 ], '메모는 자기 자신과 이을 수 없습니다.' );
			} else if ( to && seen[ key ] && !isLocked( rec.box ) ) {
				add( rec.els.to[ 0 ], '같은 관계가 이미 있습니다: ' + fieldValue( rec, 'relation' ) + ' → ' + to );
			}
			seen[ key ] = true;
		} );
		// confidence (HS32 on a new Lesson; HS37/HS38 on an update; gateway/domain/confidence.py)
		if ( lesson && lesson.els.confidence ) {
			claimLabels = conf.claims.map( function ( c ) {
				return '‘' + rules.fields.lesson[ c ].label + '’';
			} );
			confidenceProblems( recs, rules, state, claimLabels ).forEach( function ( text ) {
				add( lesson.els.confidence[ 0 ], text );
			} );
		}
		return problems;
	}

	function supportingRecord( rec, rules ) {
		return fieldValue( rec, 'outcome' ) === rules.confidence.supports &&
			rules.confidence.supporting.indexOf( fieldValue( rec, 'verification_basis' ) ) !== -1;
	}

	function confidenceProblems( recs, rules, state, claimLabels ) {
		var conf = rules.confidence, lesson = recs.lesson, after = fieldValue( lesson, 'confidence' );
		var rank = function ( v ) {
			return conf.rank.indexOf( v );
		};
		var bases = conf.supporting.map( function ( b ) {
			return '‘' + rules.fields.verification.verification_basis.labels[ b ] + '’';
		} ).join( ' 또는 ' );
		var latest = {}, covered = {}, before, changed, raised, missing;
		if ( !state.existing ) {
			if ( after === conf.rank[ conf.rank.length - 1 ] && !recs.verification.some( function ( rec ) {
				var claims = listItems( fieldValue( rec, 'claim_fields' ) );
				return supportingRecord( rec, rules ) && conf.claims.every( function ( c ) {
					return claims.indexOf( c ) !== -1;
				} );
			} ) ) {
				return [ '신뢰도 ‘' + rules.fields.lesson.confidence.labels[ after ] + '’은(는) 같은 저장에 ' + bases + '(으)로 ' +
					claimLabels.join( ', ' ) + '을(를) 모두 뒷받침한다는 근거 검증 기록이 있어야 고를 수 있습니다. ' +
					'아래에 근거 검증 기록을 덧붙이거나 신뢰도를 낮춰 주세요.' ];
			}
			return [];
		}
		before = state.loaded.confidence;
		changed = conf.claims.filter( function ( c ) {
			return fieldValue( lesson, c ) !== state.loaded[ c ];
		} );
		raised = rank( after ) > rank( before );
		if ( rank( after ) < 1 || !( changed.length || raised ) ) {
			return [];
		}
		recs.verification.forEach( function ( rec ) {
			latest[ fieldValue( rec, 'evidence_id' ) ] = rec; // page order: the last record is the current verdict
		} );
		recs.evidence.forEach( function ( rec ) {
			var v = latest[ fieldValue( rec, 'id' ) ];
			if ( v && supportingRecord( v, rules ) ) {
				listItems( fieldValue( v, 'claim_fields' ) ).forEach( function ( c ) {
					covered[ c ] = true;
				} );
			}
		} );
		missing = ( after === conf.rank[ conf.rank.length - 1 ] && ( raised || changed.length ) ? conf.claims : changed ).filter( function ( c ) {
			return !covered[ c ];
		} );
		if ( after !== conf.rank[ conf.rank.length - 1 ] && raised && !changed.length ) {
			missing = conf.claims.some( function ( c ) {
				return covered[ c ];
			} ) ? [] : conf.claims;
		}
		if ( !missing.length ) {
			return [];
		}
		return [ '신뢰도 ‘' + rules.fields.lesson.confidence.labels[ after ] + '’에는 ' + bases + '(으)로 ' +
			missing.map( function ( c ) {
				return '‘' + rules.fields.lesson[ c ].label + '’';
			} ).join( ', ' ) + '을(를) 뒷받침한다는 최신 근거 검증 기록이 필요합니다. 검증 기록을 덧붙이거나 신뢰도를 낮춰 주세요.' ];
	}

	function isLocked( box ) {
		return !!( box && box.classList.contains( 's3rm-record-locked' ) );
	}

	function recordSnapshot( box ) {
		return Array.prototype.map.call( box.querySelectorAll( 'input, select, textarea' ), function ( e ) {
			return e.name + '=' + ( e.type === 'checkbox' ? String( e.checked ) : e.value );
		} ).join( '\n' );
	}

	function noDefaultChoice( select ) {
		return !Array.prototype.some.call( select.options, function ( o ) {
			return o.defaultSelected && o.value !== '';
		} );
	}

	/**
	 * Stored records (an instance whose server-set time was filled when the form opened) become
	 * read-only: no typing, no other choice, no remove / add-above / move handle. A drop-down with
	 * no stored choice (Page Forms selects nothing when the stored value is not one of its values,
	 * so the browser would show and submit the first) is listed in ``unknown``: the save is refused
	 * rather than the value silently replaced.
	 */
	function lockStoredRecords( form, rules, state ) {
		var recs = formRecords( form, rules );
		[ 'evidence', 'verification', 'relation' ].forEach( function ( kind ) {
			recs[ kind ].forEach( function ( rec ) {
				var defs = rules.fields[ kind ], name, stored = false, box = rec.box;
				for ( name in rec.els ) {
					if ( defs[ name ] && defs[ name ].type === 'timestamp' && fieldValue( rec, name ) ) {
						stored = true;
					}
				}
				if ( !stored || !box ) {
					return;
				}
				box.classList.add( 's3rm-record-locked' );
				if ( box.parentNode && box.parentNode.classList ) {
					box.parentNode.classList.add( 's3rm-has-locked' );
				}
				Array.prototype.forEach.call( box.querySelectorAll( 'input, select, textarea' ), function ( e ) {
					var m = PF_NAME.exec( e.name || '' ), def = m && defs[ m[ 3 ] ];
					e.setAttribute( 'aria-readonly', 'true' );
					if ( e.tagName === 'SELECT' ) {
						if ( noDefaultChoice( e ) ) {
							state.unknown.push( { el: e, text: '저장된 ' + RECORD_WORDS[ kind ] + ' 기록의 ‘' + ( def ? def.label : m[ 3 ] ) +
								'’ 값은 양식이 모르는 값이라 양식으로 저장하면 바뀝니다. 이 메모는 원본 편집으로 고치거나 관리자에게 알려 주세요.' } );
						}
						Array.prototype.forEach.call( e.options, function ( o ) {
							o.disabled = !o.selected;
						} );
					} else if ( e.type === 'checkbox' ) {
						e.addEventListener( 'click', function ( event ) {
							event.preventDefault();
						} );
						e.setAttribute( 'aria-disabled', 'true' );
					} else {
						e.readOnly = true;
					}
				} );
				Array.prototype.forEach.call( box.querySelectorAll( '.removeButton, .addAboveButton, .instanceRearranger' ), function ( e ) {
					e.style.visibility = 'hidden';
					e.setAttribute( 'aria-hidden', 'true' );
					e.removeAttribute( 'tabindex' );
				} );
				( box.querySelector( '.instanceMain' ) || box ).insertBefore( el( 'div', { className: 's3rm-record-note' },
					'저장된 기록이라 고칠 수도 지울 수도 없습니다. 바로잡으려면 새 기록을 덧붙이세요.' ),
				( box.querySelector( '.instanceMain' ) || box ).firstChild );
				state.locked.push( { box: box, kind: kind, key: rec.key, id: fieldValue( rec, 'id' ) || fieldValue( rec, 'to' ),
					snapshot: recordSnapshot( box ) } );
			} );
		} );
	}

	/** New Lessons and new records offer only the values the schema allows them (``new_values``). */
	function offerNewValues( form, rules, existing ) {
		Array.prototype.forEach.call( form.querySelectorAll( 'select' ), function ( select ) {
			var m = PF_NAME.exec( select.name || '' ), kind = m && rules.templates[ m[ 1 ] ], def, first = null;
			def = kind && rules.fields[ kind ][ kind === 'lesson' ? m[ 2 ] : m[ 3 ] ];
			if ( !def || !def.new_values || ( kind === 'lesson' && existing ) || isLocked( select.closest( '.multipleTemplateInstance' ) ) ) {
				return;
			}
			Array.prototype.forEach.call( select.options, function ( o ) {
				var allowed = o.value === '' || def.new_values.indexOf( o.value ) !== -1;
				o.disabled = !allowed;
				o.hidden = !allowed;
				if ( allowed && o.value && first === null ) {
					first = o;
				}
			} );
			if ( select.selectedIndex >= 0 && select.options[ select.selectedIndex ].disabled && first ) {
				first.selected = true;
			}
		} );
	}

	function showProblems( form, problems ) {
		var box = form.querySelector( '.s3rm-form-problems' ), list;
		Array.prototype.forEach.call( form.querySelectorAll( '.s3rm-form-error' ), function ( e ) {
			e.parentNode.removeChild( e );
		} );
		Array.prototype.forEach.call( form.querySelectorAll( '[aria-invalid="true"]' ), function ( e ) {
			e.removeAttribute( 'aria-invalid' );
		} );
		if ( !problems.length ) {
			if ( box ) {
				box.parentNode.removeChild( box );
			}
			return;
		}
		if ( !box ) {
			box = el( 'div', { className: 's3rm-form-problems errorbox', role: 'alert' } );
			form.insertBefore( box, form.firstChild );
		}
		list = el( 'ul' );
		problems.forEach( function ( p ) {
			var anchor, holder;
			list.appendChild( el( 'li', null, p.text ) );
			if ( p.el ) {
				if ( /^(INPUT|SELECT|TEXTAREA)$/.test( p.el.tagName ) ) {
					p.el.setAttribute( 'aria-invalid', 'true' );
				}
				holder = p.el.closest ? p.el.closest( '.inputSpan, .checkboxesSpan, .comboboxSpan, .oo-ui-widget' ) : null;
				anchor = p.el.type === 'hidden' ? null : ( holder || p.el );
				if ( anchor && anchor.parentNode ) {
					anchor.parentNode.insertBefore( el( 'div', { className: 'errorMessage s3rm-form-error', role: 'alert' }, p.text ),
						anchor.nextSibling );
				}
			}
		} );
		clear( box );
		box.appendChild( el( 'strong', null, '저장하지 않았습니다. 아래를 고친 뒤 다시 저장해 주세요.' ) );
		box.appendChild( list );
		if ( box.scrollIntoView ) {
			box.scrollIntoView( { block: 'start' } );
		}
	}

	var FORM_ACTIONS = { wpSave: 'save', wpSaveAndContinue: 'save', wpPreview: 'preview', wpDiff: 'diff' };

	function fillLessonForm( form ) {
		var updated = formFields( form, /^Lesson\[updated_at\]$/ );
		var loaded = updated.length ? updated[ 0 ].value : '';
		var existing = ( mw.config.get( 'wgNamespaceNumber' ) === 3000 && mw.config.get( 'wgArticleId' ) > 0 ) || !!loaded;
		var rules = formRules();
		var state = { existing: existing, loaded: {}, locked: [], unknown: [] };
		var action = 'save';
		var checked = null;
		var lessonRecord;
		var origin = formFields( form, /^Lesson\[record_origin\]$/ );
		if ( existing ) {
			lockAfterCreate( form );
			origin.forEach( function ( select ) {
				if ( select.tagName === 'SELECT' && noDefaultChoice( select ) ) {
					state.unknown.push( { el: select, text: '저장된 ‘자료 출처’ 값은 양식이 모르는 값이라 양식으로 저장하면 바뀝니다. ' +
						'이 메모는 원본 편집으로 고치거나 관리자에게 알려 주세요.' } );
				}
			} );
		}
		// Fills an empty field, and re-fills one this script filled before: Page Forms may refuse a
		// save after the click (a missing mandatory field), and the next click must not leave the
		// first click's created_at behind the new updated_at.
		function fillEmpty( value ) {
			return function ( el ) {
				if ( !el.value || el.value === el.getAttribute( 'data-s3rm-filled' ) ) {
					el.value = value;
					el.setAttribute( 'data-s3rm-filled', value );
				}
			};
		}
		// The stamps, the verification ids and the relation's "from" are filled for a save only: a
		// preview or "show changes" comes back as a form holding what was posted, and a time
		// filled then would be older than the save's (HS14, HS16) and read as a stored page.
		function fill() {
			var nowMs = Date.now(), now = isoSecond( nowMs ), next = now, lessonId = formLessonId();
			if ( ISO_SECOND.test( loaded ) && Date.parse( loaded ) >= Date.parse( now ) ) {
				next = isoSecond( Date.parse( loaded ) + 1000 ); // updated_at strictly increases
			}
			formFields( form, /^Lesson\[created_at\]$/ ).forEach( fillEmpty( next ) );
			updated.forEach( function ( el ) {
				el.value = next;
			} );
			formFields( form, /^Lesson evidence\[[^\]]+\]\[added_at\]$/ ).forEach( fillEmpty( next ) );
			formFields( form, /^Lesson evidence verification\[[^\]]+\]\[verified_at\]$/ ).forEach( fillEmpty( next ) );
			formFields( form, /^Lesson relation\[[^\]]+\]\[created_at\]$/ ).forEach( fillEmpty( next ) );
			if ( lessonId ) {
				formFields( form, /^Lesson relation\[[^\]]+\]\[from\]$/ ).forEach( fillEmpty( lessonId ) );
			}
			formFields( form, /^Lesson evidence verification\[[^\]]+\]\[id\]$/ ).forEach( function ( el, i ) {
				fillEmpty( 'v' + next.replace( /\D/g, '' ) + '-' + ( i + 1 ) )( el );
			} );
		}
		function relationIds() {
			formFields( form, /^Lesson relation\[[^\]]+\]\[to\]$/ ).forEach( function ( el ) {
				var id = titleToLessonId( el.value );
				if ( id !== el.value && !isLocked( el.closest ? el.closest( '.multipleTemplateInstance' ) : null ) ) {
					setFieldValue( el, id );
				}
			} );
		}
		// The picker matches what the reader types against page names, which show "_" as a space
		// (locally: the label's words; remotely: PFValuesUtils turns spaces back into "_" for
		// page_title), so an id typed with underscores is shown and searched with spaces.
		form.addEventListener( 'input', function ( event ) {
			var t = event.target;
			if ( t && t.tagName === 'INPUT' && t.hasAttribute( 'autocompletesettings' ) &&
				t.closest( '.s3rm-form-relation' ) && t.value.indexOf( '_' ) !== -1 ) {
				var at = t.selectionStart;
				t.value = t.value.replace( /_/g, ' ' );
				if ( typeof at === 'number' ) {
					t.setSelectionRange( at, at );
				}
			}
		}, true );
		var encode = encoderFor( form );
		// Runs once per submission (the click, the submit event and Page Forms' validation hook may
		// all call it in one turn): checks the rules on the plain values, fills, encodes. Returns
		// the problems; the caller refuses the submission when there are any.
		function beforeSave() {
			if ( checked === null ) {
				checked = rules ? checkLessonForm( form, rules, state ) : [];
				setTimeout( function () {
					checked = null;
				}, 0 );
				showProblems( form, checked );
				if ( !checked.length ) {
					relationIds();
					if ( action === 'save' ) {
						fill();
					}
					encode();
				}
			}
			return checked;
		}
		function refuse( event ) {
			if ( beforeSave().length ) {
				event.preventDefault();
				event.stopImmediatePropagation();
			}
		}
		decodeFormFields( form );
		if ( rules ) {
			if ( existing ) {
				lockStoredRecords( form, rules, state );
			}
			offerNewValues( form, rules, existing );
			lessonRecord = formRecords( form, rules ).lesson;
			if ( lessonRecord ) {
				Object.keys( rules.fields.lesson ).forEach( function ( name ) {
					state.loaded[ name ] = fieldValue( lessonRecord, name );
				} );
			}
		}
		form.addEventListener( 'click', function ( event ) {
			var button = event.target && event.target.closest ? event.target.closest( '[name]' ) : null;
			if ( button && FORM_ACTIONS[ button.name ] ) {
				action = FORM_ACTIONS[ button.name ];
			}
		}, true );
		form.addEventListener( 'submit', function ( event ) {
			if ( event.submitter && FORM_ACTIONS[ event.submitter.name ] ) {
				action = FORM_ACTIONS[ event.submitter.name ];
			}
			refuse( event );
		}, true );
		Array.prototype.forEach.call( form.querySelectorAll( '[name="wpSave"], [name="wpPreview"], [name="wpDiff"]' ), function ( button ) {
			button.addEventListener( 'click', refuse, true ); // Page Forms may submit from script
		} );
		if ( mw.hook ) {
			// PageForms.js validateAll() fires these, on a save, a preview and "save and continue":
			// the first before its own checks, the second with a counter of errors
			mw.hook( 'pf.formValidationBefore' ).add( beforeSave );
			mw.hook( 'pf.formValidation' ).add( function ( args ) {
				var problems = beforeSave();
				if ( problems.length && args && typeof args.numErrors === 'number' ) {
					args.numErrors += problems.length;
					showProblems( form, problems ); // validateAll removed the .errorMessage notes
				}
			} );
		}
	}

	// ---- Page headings show the Lesson id (docs/browser.md#form-rules)
	// MediaWiki shows a title's underscores as spaces ("Lesson:nccl timeout fix"), Page Forms
	// likewise in the form's heading; the Lesson id is what agents and readers type.
	function headingShowsId() {
		var heading = document.getElementById( 'firstHeading' ), id, spaced, walker, node;
		id = formLessonId() || ( mw.config.get( 'wgNamespaceNumber' ) === 3000 ? String( mw.config.get( 'wgTitle' ) || '' ).replace( / /g, '_' ) : '' );
		spaced = id.replace( /_/g, ' ' );
		if ( !heading || !id || spaced === id ) {
			return;
		}
		walker = document.createTreeWalker( heading, NodeFilter.SHOW_TEXT, null, false );
		for ( node = walker.nextNode(); node; node = walker.nextNode() ) {
			if ( node.nodeValue.indexOf( spaced ) !== -1 ) {
				node.nodeValue = node.nodeValue.split( spaced ).join( id );
			}
		}
	}

	// does Lesson:<id> exist? resolves true/false, rejects when the wiki API does not answer
	function lessonExists( id ) {
		var request;
		try {
			request = new mw.Api().get( { action: 'query', titles: LESSON_NS + ':' + id, formatversion: 2 } );
		} catch ( e ) {
			return Promise.reject( e );
		}
		return request.then( function ( data ) {
			var page = data && data.query && data.query.pages && data.query.pages[ 0 ];
			return !!( page && !page.missing && !page.invalid );
		} );
	}

	// ---- Page Forms' #forminput launcher (docs/browser.md#id-check)
	// {{#forminput}} renders <form name="createbox" class="pfFormInput"> with a hidden "form" and
	// "namespace" input; PF_formInput.js adds the page name input (name="page_name") later, so the
	// check listens on the document. The same id rule as the plain launcher decides; a refused id
	// never reaches Special:FormStart. An id that names an existing Lesson is said so, with links
	// to that Lesson and its form, instead of opening its form as if it were new.
	function guardFormInputs( root ) {
		root.addEventListener( 'submit', function ( event ) {
			var form = event.target, nameInput, formName, message, problem, id;
			if ( !form || !form.classList || !form.classList.contains( 'pfFormInput' ) ) {
				return;
			}
			formName = form.querySelector( '[name="form"]' );
			nameInput = form.querySelector( '[name="page_name"]' );
			if ( !nameInput || ( formName && formName.value !== 'Lesson' ) ) {
				return;
			}
			problem = validateLessonId( nameInput.value );
			message = form.querySelector( '.s3rm-create-message' );
			if ( !message ) {
				message = el( 'p', { className: 's3rm-create-message', role: 'status' } );
				form.appendChild( message );
			}
			function say( content, isError, stateName ) {
				clear( message );
				message.appendChild( typeof content === 'string' ? document.createTextNode( content ) : content );
				message.className = 's3rm-create-message' + ( isError ? ' is-error' : '' );
				nameInput.setAttribute( 'aria-invalid', isError ? 'true' : 'false' );
				form.setAttribute( 'data-state', stateName );
			}
			if ( problem ) {
				event.preventDefault();
				event.stopImmediatePropagation();
				say( problem, true, 'invalid' );
				nameInput.focus();
				return;
			}
			id = nameInput.value.trim();
			nameInput.value = id;
			event.preventDefault();
			event.stopImmediatePropagation();
			say( '같은 ID의 메모가 있는지 확인하는 중입니다…', false, 'checking' );
			function go() {
				HTMLFormElement.prototype.submit.call( form ); // no second submit event: checked already
			}
			lessonExists( id ).then( function ( exists ) {
				if ( !exists ) {
					say( '', false, 'ok' );
					go();
					return;
				}
				say( el( 'span', null, [
					'이미 같은 ID의 메모가 있습니다: ' + LESSON_NS + ':' + id + '. ',
					el( 'a', { href: lessonUrl( id ), className: 's3rm-exists-open' }, '그 메모 보기' ),
					' · ',
					el( 'a', { href: lessonUrl( id, { action: 'formedit' } ), className: 's3rm-exists-edit' }, '양식으로 고치기' ),
					'. 새 메모라면 다른 ID를 고르세요.'
				] ), true, 'exists' );
			}, go ); // the check is a courtesy: go ahead if the wiki API did not answer
		}, true );
	}

	function init() {
		var graphRoot = document.getElementById( 's3rm-knowledge-graph' );
		var createRoot = document.getElementById( 's3rm-create-form' );
		var recentRoot = document.getElementById( 's3rm-recent-list' );
		var digests = document.querySelectorAll( '.s3rm-evidence-digest[data-evidence-id]' );
		mw.s3rm = mw.s3rm || {};
		mw.s3rm.validateLessonId = validateLessonId;
		mw.s3rm.clip = clip;
		mw.s3rm.encodeValue = encodeValue;
		mw.s3rm.decodeValue = decodeValue;
		if ( graphRoot ) {
			initHome( graphRoot, earlyGraph );
		} else if ( recentRoot ) {
			fillRecent( recentRoot, null );
		}
		if ( createRoot ) {
			buildCreateForm( createRoot );
		}
		guardFormInputs( document );
		headingShowsId();
		localizeTimes( document.getElementById( 'mw-content-text' ) );
		if ( digests.length && mw.config.get( 'wgNamespaceNumber' ) === 3000 && mw.config.get( 'wgAction' ) === 'view' ) {
			fillDigests( Array.prototype.slice.call( digests, 0, 200 ) );
		}
		var pfForm = document.getElementById( 'pfForm' );
		if ( pfForm && pfForm.querySelector( '[name^="Lesson["]' ) ) {
			fillLessonForm( pfForm );
		}
	}

	// Start the graph download at once: it does not need the modules below.
	var earlyGraph = document.getElementById( 's3rm-knowledge-graph' ) ? fetchGraph() : null;
	if ( earlyGraph ) {
		earlyGraph.then( null, function () {} ); // handled in initHome; avoid an unhandled-rejection warning
	}

	mw.loader.using( [ 'mediawiki.util', 'mediawiki.api' ] ).then( function () {
		$( init );
	} );
}() );
