// Where stexecd listens, and connecting to it: the rules of the C client
// (client/client.c stexec_default_socket, stexec_connect).
import * as net from "node:net";
import { ConnectError } from "./errors.js";

/** The system daemon's socket, the last resort. */
export const RUN_SOCKET = "/run/stexec/stexecd.sock";

/**
 * The socket the daemon uses by default: $STEXEC_SOCKET, else
 * $XDG_RUNTIME_DIR/stexec/stexecd.sock when it is absolute, else
 * /run/stexec/stexecd.sock (an empty variable counts as unset).
 */
export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.STEXEC_SOCKET) return env.STEXEC_SOCKET;
  // A relative XDG_RUNTIME_DIR must be ignored (XDG spec), as the daemon does.
  if (env.XDG_RUNTIME_DIR?.startsWith('/')) return `${env.XDG_RUNTIME_DIR}/stexec/stexecd.sock`;
  return RUN_SOCKET;
}

function open(path: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ path });
    const onError = (err: Error): void => {
      sock.destroy();
      reject(err);
    };
    sock.once("error", onError);
    sock.once("connect", () => {
      sock.off("error", onError);
      resolve(sock);
    });
  });
}

const missing = new Set(["ENOENT", "ECONNREFUSED", "ENOTDIR"]);

/**
 * Connect to `path`, or with none to the default socket; when that is the
 * $XDG_RUNTIME_DIR one and nothing listens there, to a system daemon on
 * /run/stexec ($STEXEC_FALLBACK_SOCKET instead when set). Throws ConnectError saying what to do.
 */
export async function connectSocket(
  path?: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ socket: net.Socket; path: string }> {
  const byDefault = path === undefined;
  const first = path ?? defaultSocketPath(env);
  // $STEXEC_FALLBACK_SOCKET: for tests, which must not meet a system daemon.
  const fallback = env.STEXEC_FALLBACK_SOCKET || RUN_SOCKET;
  try {
    return { socket: await open(first), path: first };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (byDefault && !env.STEXEC_SOCKET && first !== fallback && code !== undefined && missing.has(code)) {
      try {
        return { socket: await open(fallback), path: fallback };
      } catch {
        throw connectError(first, fallback, err as NodeJS.ErrnoException, true);
      }
    }
    throw connectError(first, undefined, err as NodeJS.ErrnoException, byDefault || first === env.STEXEC_SOCKET);
  }
}

function connectError(path: string, also: string | undefined, err: NodeJS.ErrnoException, byDefault: boolean): ConnectError {
  const tried = also === undefined ? "" : ` (nor ${also})`;
  const start = byDefault ? "stexecd" : `stexecd --socket ${path}`;
  let msg: string;
  switch (err.code) {
    case "ENOENT":
    case "ENOTDIR":
      msg = `cannot connect to ${path}${tried}: ${err.code} — is stexecd running? Start it with: ${start}`;
      break;
    case "ECONNREFUSED":
      msg = `cannot connect to ${path}${tried}: ${err.code} — the socket is stale, stexecd is not running. Start it with: ${start}`;
      break;
    case "EACCES":
    case "EPERM":
      msg = `cannot connect to ${path}: ${err.code} — the socket belongs to another user (mode 0600); run as that user, or start stexecd with --socket-mode`;
      break;
    default:
      msg = `cannot connect to ${path}: ${err.message}`;
  }
  return new ConnectError(msg, path, err.code);
}
