<?php
// Router for the dev wiki's `php -S` (copied into the wiki directory by
// sync/devstack/wikiserver.py). Returning false lets the built-in server serve
// the static file or PHP entry point itself; the web installer and maintenance
// directory are not served.
$path = (string)parse_url( $_SERVER['REQUEST_URI'], PHP_URL_PATH );
if ( preg_match( '#^/+(mw-config|maintenance|vendor|includes|tests)(/|$)#', $path ) ) {
	http_response_code( 403 );
	echo "Forbidden\n";
	return true;
}
return false;
