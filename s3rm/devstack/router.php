<?php
// Router for the dev wiki's `php -S` (copied into the wiki directory by
// s3rm/devstack/wikiserver.py). Returning false lets the built-in server serve
// the static file or PHP entry point itself; the web installer and maintenance
// directory are not served. The logo is the copy wikiserver.py puts beside this file
// (of deploy/mediawiki/assets/s3rm-logo.svg, the file the production image copies).
$path = (string)parse_url( $_SERVER['REQUEST_URI'], PHP_URL_PATH );
if ( preg_match( '#^/+(mw-config|maintenance|vendor|includes|tests)(/|$)#', $path ) ) {
	http_response_code( 403 );
	echo "Forbidden\n";
	return true;
}
if ( $path === '/s3rm-assets/s3rm-logo.svg' ) {
	header( 'Content-Type: image/svg+xml' );
	header( 'Cache-Control: max-age=3600' );
	readfile( __DIR__ . '/s3rm-assets/s3rm-logo.svg' );
	return true;
}
return false;
