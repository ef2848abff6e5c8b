<?php
// Template of the dev wiki's settings (S3RM.php in the wiki directory), rendered
// by s3rm/devstack/settings.py on every `s3rm dev wiki up`. Edit this file, not
// the rendered copy. Placeholders (an upper-case name between double at signs)
// are filled from schema/lesson.toml and the wiki's address. The blocks between "s3rm shared" markers must equal
// the same blocks of deploy/mediawiki/LocalSettings.php once rendered
// (tests/s3rm/devstack/test_localsettings.py).
if ( !defined( 'MEDIAWIKI' ) ) {
	exit;
}

$wgServer = @@SERVER@@;
$wgCanonicalServer = @@SERVER@@;

# >>> s3rm shared: lesson-namespace
# The Lesson namespace (id and name from schema/lesson.toml): content, searched by
# default; Lesson ids are lower-case and never capitalised.
define( 'NS_LESSON', @@NS_LESSON@@ );
define( 'NS_LESSON_TALK', @@NS_LESSON_TALK@@ );
$wgExtraNamespaces[NS_LESSON] = '@@LESSON_NAMESPACE@@';
$wgExtraNamespaces[NS_LESSON_TALK] = '@@LESSON_TALK_NAMESPACE@@';
$wgContentNamespaces[] = NS_LESSON;
$wgNamespacesToBeSearchedDefault[NS_LESSON] = true;
$wgCapitalLinkOverrides[NS_LESSON] = false;
$wgCapitalLinkOverrides[NS_LESSON_TALK] = false;
# <<< s3rm shared: lesson-namespace

wfLoadExtension( 'ParserFunctions' );
# >>> s3rm shared: scribunto
# Scribunto runs Module:S3RM values, through which the Lesson templates hand values to
# Semantic MediaWiki decoded (docs/browser.md#values-in-smw). The standalone engine runs
# Debian's lua5.1 binary (installed by scripts/install.sh and the production image).
wfLoadExtension( 'Scribunto' );
$wgScribuntoDefaultEngine = 'luastandalone';
$wgScribuntoEngineConf['luastandalone']['luaPath'] = '/usr/bin/lua5.1';
# <<< s3rm shared: scribunto

// Vector is loaded by the installer's LocalSettings.php; the router serves the logo.
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

# >>> s3rm shared: rights
# Reading is public; writing needs a named account (docs/operations.md#wiki-accounts), on the
# development wiki too. Anonymous readers keep 'writeapi': the API's login module is a write
# module, so bot passwords could not log in without it; it grants no edit by itself.
$wgGroupPermissions['*']['edit'] = false;
$wgGroupPermissions['*']['createpage'] = false;
$wgGroupPermissions['*']['createaccount'] = false;
# <<< s3rm shared: rights

// The main database commits without an fsync (SQLite synchronous=NORMAL; the installer already sets it
// for the cache, localisation and job queue databases). In WAL mode (s3rm/devstack/devwiki.py) a crash
// cannot corrupt the file, at most lose the last commits of a disposable development wiki. A save
// commits about a dozen times while it holds SQLite's one write lock, so each fsync spared shortens
// the queue of concurrent saves (docs/operations.md#dev-wiki-sqlite).
$wgDBservers = [ [
	'type' => 'sqlite', 'dbname' => $wgDBname, 'host' => '', 'user' => '', 'password' => '',
	'load' => 1, 'flags' => DBO_DEFAULT, 'variables' => [ 'synchronous' => 'NORMAL' ],
] ];

// One cache shared by the php -S workers, maintenance scripts and the job runner.
$wgMainCacheType = CACHE_DB;
$wgParserCacheType = CACHE_DB;
$wgSessionCacheType = CACHE_DB;
$wgMessageCacheType = CACHE_DB;
$wgUseFileCache = false;

$wgEnableUploads = false;
$wgEnableEmail = false;
$wgEnableUserEmail = false;
$wgEmailAuthentication = false;
$wgEnotifUserTalk = false;
$wgEnotifWatchlist = false;

// Tests edit and log in fast from one IP: no rate limits or login throttles. Empty lists,
// not false: MediaWiki's config schema types these as list / int|list, and update.php
// (needed to install SMW) refuses a boolean.
$wgRateLimits = [];
$wgPasswordAttemptThrottle = [];
$wgAccountCreationThrottle = [];

// Development: show and log exception details.
$wgShowExceptionDetails = true;
$wgDebugLogGroups['exception'] = __DIR__ . '/logs/exception.log';
$wgDebugLogGroups['error'] = __DIR__ . '/logs/exception.log';

// A wiki directory may carry local overrides (a browser test uses it to switch anonymous editing on).
if ( is_file( __DIR__ . '/S3RM.local.php' ) ) {
	require __DIR__ . '/S3RM.local.php';
}
