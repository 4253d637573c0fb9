#include <curl/curl.h>

/* CURLVERSION_NOW is a macro naming an enum constant, which Swift does not import. */
static const CURLversion ingest_curlversion_now = CURLVERSION_NOW;
