<?php
/**
 * Server URL selection for the S3RM wiki (docs/operations.md#direct-url).
 *
 * s3rm_select_server( $canonical, $direct, $requestHost, $sapi ): string
 *   $canonical    MW_SERVER_URL, e.g. "https://s3wiki.example.org" (canonical links, jobs, CLI)
 *   $direct       S3RM_WIKI_DIRECT_URL or "" (optional direct HTTP entry, e.g. "http://203.0.113.5:8081")
 *   $requestHost  the request's Host header ("" on the CLI)
 *   $sapi         PHP_SAPI
 * Returns $direct (without a trailing slash) only for a web request whose Host equals the
 * direct URL's host[:port] exactly (case-insensitive); $canonical otherwise. It never picks a
 * URL from the Host header itself, so a forged Host cannot make MediaWiki emit another origin.
 * Throws InvalidArgumentException for a direct URL that is not an absolute http(s) origin.
 */
function s3rm_select_server( string $canonical, string $direct, string $requestHost, string $sapi ): string {
	$canonical = rtrim( $canonical, '/' );
	$direct = rtrim( $direct, '/' );
	if ( $direct === '' || $sapi === 'cli' || $requestHost === '' ) {
		return $canonical;
	}
	$parts = parse_url( $direct );
	if ( !is_array( $parts ) || !isset( $parts['scheme'], $parts['host'] )
		|| !in_array( strtolower( $parts['scheme'] ), [ 'http', 'https' ], true )
		|| isset( $parts['path'] ) || isset( $parts['query'] ) || isset( $parts['user'] )
	) {
		throw new InvalidArgumentException( 'S3RM_WIKI_DIRECT_URL must be an origin such as http://203.0.113.5:8081' );
	}
	$expected = strtolower( $parts['host'] ) . ( isset( $parts['port'] ) ? ':' . $parts['port'] : '' );
	return strtolower( trim( $requestHost ) ) === $expected ? $direct : $canonical;
}
