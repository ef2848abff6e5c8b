<?php
/**
 * LocalSettings for the S3RM production wiki, read entirely from the environment
 * (compose.yaml x-wiki-env; deploy/env.example). Loaded through a one-line
 * /var/www/html/LocalSettings.php written by s3rm-entrypoint after installation.
 * Never edit settings in the container: change .env and recreate the service.
 */
if ( !defined( 'MEDIAWIKI' ) ) {
	exit;
}
require_once __DIR__ . '/s3rm-server.php';

function s3rm_env( string $name, ?string $default = null ): string {
	$value = getenv( $name );
	if ( $value === false || $value === '' ) {
		if ( $default === null ) {
			throw new RuntimeException( "s3rm: the environment variable $name is required" );
		}
		return $default;
	}
	return $value;
}

# ---------------------------------------------------------------- site
$wgSitename = s3rm_env( 'MW_SITE_NAME', 'S3 연구 메모리' );
$wgMetaNamespace = 'S3RM';
$wgLanguageCode = 'ko';
$wgLocaltimezone = 'UTC';
$wgScriptPath = '';
$wgResourceBasePath = $wgScriptPath;

# Canonical links, e-mails and jobs always use MW_SERVER_URL; the optional direct entry
# S3RM_WIKI_DIRECT_URL is chosen only for a request with exactly that Host (docs/operations.md#direct-url).
$wgCanonicalServer = rtrim( s3rm_env( 'MW_SERVER_URL' ), '/' );
$wgServer = s3rm_select_server(
	$wgCanonicalServer, s3rm_env( 'S3RM_WIKI_DIRECT_URL', '' ), $_SERVER['HTTP_HOST'] ?? '', PHP_SAPI
);

# ------------------------------------------------------------ database
$wgDBtype = 'mysql';
$wgDBserver = s3rm_env( 'MW_DB_HOST', 'mariadb' );
$wgDBname = s3rm_env( 'MW_DB_NAME', 's3rm_wiki' );
$wgDBuser = s3rm_env( 'MW_DB_USER', 's3rm_wiki' );
$wgDBpassword = s3rm_env( 'MW_DB_PASSWORD' );
$wgDBprefix = '';
$wgDBTableOptions = 'ENGINE=InnoDB, DEFAULT CHARSET=binary';
# MySQL full-text search (the default engine): MariaDB keeps its default minimum word length (docs/operations.md#mariadb).
$wgSearchType = null;

$wgSecretKey = s3rm_env( 'MW_SECRET_KEY' );
$wgUpgradeKey = s3rm_env( 'MW_UPGRADE_KEY' );
$wgAuthenticationTokenVersion = '1';

# ------------------------------------------------------------- caches
$wgMainCacheType = CACHE_ACCEL;
$wgSessionCacheType = CACHE_DB;
$wgParserCacheType = CACHE_DB;
$wgMessageCacheType = CACHE_ACCEL;

# --------------------------------------------------- Lesson namespace
# The blocks between "s3rm shared" markers equal the dev wiki's settings template
# (s3rm/devstack/LocalSettings.dev.php) rendered from schema/lesson.toml; a test checks it.
# >>> s3rm shared: lesson-namespace
# The Lesson namespace (id and name from schema/lesson.toml): content, searched by
# default; Lesson ids are lower-case and never capitalised.
define( 'NS_LESSON', 3000 );
define( 'NS_LESSON_TALK', 3001 );
$wgExtraNamespaces[NS_LESSON] = 'Lesson';
$wgExtraNamespaces[NS_LESSON_TALK] = 'Lesson_talk';
$wgContentNamespaces[] = NS_LESSON;
$wgNamespacesToBeSearchedDefault[NS_LESSON] = true;
$wgCapitalLinkOverrides[NS_LESSON] = false;
$wgCapitalLinkOverrides[NS_LESSON_TALK] = false;
# <<< s3rm shared: lesson-namespace

# ---------------------------------------------------------- extensions
wfLoadExtension( 'ParserFunctions' );
# >>> s3rm shared: scribunto
# Scribunto runs Module:S3RM values, through which the Lesson templates hand values to
# Semantic MediaWiki decoded (docs/browser.md#values-in-smw). The standalone engine runs
# Debian's lua5.1 binary (installed by scripts/install.sh and the production image).
wfLoadExtension( 'Scribunto' );
$wgScribuntoDefaultEngine = 'luastandalone';
$wgScribuntoEngineConf['luastandalone']['luaPath'] = '/usr/bin/lua5.1';
# <<< s3rm shared: scribunto
# SMW's setup marker (.smw.json) lives on a volume shared by mediawiki and jobrunner, so a
# recreated container (or the job runner, which never runs update.php) sees a set-up store.
$smwgConfigFileDir = '/var/lib/s3rm/smw';
wfLoadExtension( 'SemanticMediaWiki' );
enableSemantics( parse_url( $wgCanonicalServer, PHP_URL_HOST ) );
$smwgNamespacesWithSemanticLinks[NS_LESSON] = true;
$smwgNamespacesWithSemanticLinks[NS_LESSON_TALK] = false;
# A page that embeds an #ask is purged when an entity its query depends on changes
# (docs/operations.md#smw-settings); SMW's default exemption list stays: _MDAT, _SOBJ
# and the query meta properties do not trigger a purge.
$smwgEnabledQueryDependencyLinksStore = true;
wfLoadExtension( 'PageForms' );
# Page Forms shows page names in pickers and the form-edit tab on Lesson pages
# (docs/browser.md#page-forms): the relation picker always asks the API, whose
# page_title match takes an id typed with underscores.
$wgPageFormsMaxLocalAutocompleteValues = 0;

# ----------------------------------------------------------- editing
# >>> s3rm shared: editing
# Site JS/CSS are pushed by `s3rm sync push` with a bot password in interface-admin.
$wgEnableBotPasswords = true;
$wgUseSiteJs = true;
$wgUseSiteCss = true;
$wgAllowSiteCSSOnRestrictedPages = true;
# Jobs run only in the job runner, which records its freshness for /readyz.
$wgJobRunRate = 0;
# Never three-way merge a stale edit: a save whose base revision is no longer the
# latest becomes an edit conflict, for the gateway, sync and browser editors alike
# (docs/consistency.md).
$wgDiff3 = false;
# <<< s3rm shared: editing

# --------------------------------------------------------------- skin
# The official image bundles Vector; the Dockerfile copies the logo into the web root.
wfLoadSkin( 'Vector' );
# >>> s3rm shared: skin
# Vector 2022 in its responsive mode: a device-width viewport on phones (MediaWiki 1.39 and
# 1.43; in 1.43 only Vector 2022 is responsive-capable). The logo is the project's own SVG,
# deploy/mediawiki/assets/s3rm-logo.svg, served at this path on both wikis
# (docs/operations.md#browser-and-skin).
$wgDefaultSkin = 'vector-2022';
$wgVectorResponsive = true;
$wgLogos = [
	'1x' => '/s3rm-assets/s3rm-logo.svg',
	'icon' => '/s3rm-assets/s3rm-logo.svg',
	'svg' => '/s3rm-assets/s3rm-logo.svg',
];
# <<< s3rm shared: skin

# ------------------------------------------------ accounts and rights
# >>> s3rm shared: rights
# Reading is public; writing needs a named account (docs/operations.md#wiki-accounts), on the
# development wiki too. Anonymous readers keep 'writeapi': the API's login module is a write
# module, so bot passwords could not log in without it; it grants no edit by itself.
$wgGroupPermissions['*']['edit'] = false;
$wgGroupPermissions['*']['createpage'] = false;
$wgGroupPermissions['*']['createaccount'] = false;
# <<< s3rm shared: rights

# ------------------------------------------------------- reverse proxy
# Caddy (profile "domain") sits in front; trust X-Forwarded-For only from these networks.
$wgUsePrivateIPs = true;
$wgCdnServersNoPurge = array_values( array_filter( array_map(
	'trim', explode( ',', s3rm_env( 'MW_TRUSTED_PROXIES', '172.16.0.0/12' ) )
) ) );

# -------------------------------------------------------------- files
$wgEnableUploads = true;
$wgUploadDirectory = "$IP/images";
$wgUploadPath = "$wgScriptPath/images";
$wgFileExtensions = [ 'png', 'jpg', 'jpeg', 'gif', 'svg', 'pdf', 'csv', 'txt' ];
$wgMaxUploadSize = 20 * 1024 * 1024;

$wgEnableEmail = false;
$wgEnableUserEmail = false;
$wgShowExceptionDetails = false;
