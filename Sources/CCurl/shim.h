#include <curl/curl.h>

/* CURLVERSION_NOW is a macro naming an enum constant, which Swift does not import. */
static const CURLversion ingest_curlversion_now = CURLVERSION_NOW;

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
   wrapper per kind of argument. */
typedef size_t (*ingest_curl_data_callback)(char *buffer, size_t size, size_t count, void *context);

static inline CURLcode ingest_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode ingest_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode ingest_curl_set_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode ingest_curl_set_callback(CURL *handle, CURLoption option, ingest_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
/* CURLOPT_SEEKFUNCTION: how libcurl rewinds a read-callback body before sending it again. */
typedef int (*ingest_curl_seek_callback)(void *context, curl_off_t offset, int origin);
static inline CURLcode ingest_curl_set_seek_callback(CURL *handle, ingest_curl_seek_callback value) {
    return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, value);
}
static inline CURLcode ingest_curl_get_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode ingest_curl_get_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLMcode ingest_curl_multi_set_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/* The multi handle's socket and timer callbacks (curl_multi_socket_action). */
static inline CURLMcode ingest_curl_multi_set_socket_callback(CURLM *multi, curl_socket_callback value, void *data) {
    CURLMcode code = curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, value);
    return code != CURLM_OK ? code : curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, data);
}
static inline CURLMcode ingest_curl_multi_set_timer_callback(CURLM *multi, curl_multi_timer_callback value, void *data) {
    CURLMcode code = curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, value);
    return code != CURLM_OK ? code : curl_multi_setopt(multi, CURLMOPT_TIMERDATA, data);
}
