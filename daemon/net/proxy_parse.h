/*
 * What a tool's client says to the daemon's proxy, parsed: an HTTP/1.x
 * request head (CONNECT host:port, or an absolute-form URL for plain
 * HTTP) and the SOCKS5 greeting and CONNECT request. Pure functions over
 * the bytes received so far: no sockets, no policy (core/netpolicy.h
 * decides), no event loop (net/proxy.c relays).
 */
#ifndef STEXEC_PROXY_PARSE_H
#define STEXEC_PROXY_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A request head's bound: a client that sends more is refused (431). */
#define PROXY_HEAD_MAX 16384
/* A host as a client may name it: a DNS name, or an IPv6 literal. */
#define PROXY_HOST_MAX 256

struct proxy_target {
	char host[PROXY_HOST_MAX]; /* as named, brackets off an IPv6 literal */
	uint16_t port;
};

enum proxy_parse {
	PROXY_PARSE_MORE,  /* incomplete: read on */
	PROXY_PARSE_DONE,
	PROXY_PARSE_ERROR, /* err says what; reply and close */
};

struct proxy_http {
	struct proxy_target target;
	bool connect;      /* CONNECT: a tunnel; else one plain request */
	/*
	 * Plain HTTP: the head to send upstream, malloc'd: the request line
	 * in origin form (less the URL's fragment), the client's headers less
	 * the hop-by-hop and Proxy-* ones, Host set to the URL's authority (the URL decides, never a
	 * Host header) and Connection: close (one request per connection,
	 * so that no later request reaches this server under another name).
	 */
	char *head;
	size_t head_len;
	size_t consumed;   /* bytes of the input the head took */
};

/*
 * An HTTP request head at the start of buf (len bytes so far). DONE fills
 * out (free out->head); ERROR sets err and *status (400, 431, 501). A
 * head is refused whole when a line is ambiguous: a method or header name
 * that is not a token, a control byte (a bare CR, a NUL) anywhere, a
 * folded header line.
 */
enum proxy_parse proxy_parse_http(const char *buf, size_t len,
    struct proxy_http *out, int *status, char *err, size_t errlen);

/*
 * SOCKS5's greeting: DONE with *consumed and *ok (the client offers "no
 * authentication", the only method served).
 */
enum proxy_parse proxy_parse_socks_greeting(const uint8_t *buf, size_t len,
    size_t *consumed, bool *ok);

/*
 * SOCKS5's request: DONE fills target; ERROR sets *reply (the SOCKS reply
 * code: 7 command not supported, 8 address type not supported, 1 general
 * failure) and err.
 */
enum proxy_parse proxy_parse_socks_request(const uint8_t *buf, size_t len,
    size_t *consumed, struct proxy_target *target, uint8_t *reply,
    char *err, size_t errlen);

#endif
