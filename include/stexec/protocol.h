/* stexec wire protocol constants (doc/design.md §3). Version 1. */
#ifndef STEXEC_PROTOCOL_H
#define STEXEC_PROTOCOL_H

#define STEXEC_PROTOCOL_VERSION 1

/* Default maximum length of one NDJSON line, newline excluded. */
#define STEXEC_MAX_MESSAGE_DEFAULT (4u * 1024 * 1024)

/* JSON-RPC 2.0 standard errors. */
#define STEXEC_ERR_PARSE -32700
#define STEXEC_ERR_INVALID_REQUEST -32600
#define STEXEC_ERR_METHOD_NOT_FOUND -32601
#define STEXEC_ERR_INVALID_PARAMS -32602
#define STEXEC_ERR_INTERNAL -32603

/* Application errors. */
#define STEXEC_ERR_UNKNOWN_SESSION -32001
#define STEXEC_ERR_DUPLICATE_TOOL_USE -32002
#define STEXEC_ERR_NOT_PERMITTED -32003
#define STEXEC_ERR_LIMIT -32004
#define STEXEC_ERR_STATE -32005

/* Environment variable naming the socket, after --socket. */
#define STEXEC_SOCKET_ENV "STEXEC_SOCKET"

#endif
