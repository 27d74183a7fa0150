// stexec: the TypeScript client of stexecd (protocol/PROTOCOL.md).
export * from "./protocol.js";
export * from "./errors.js";
export * from "./jobs.js";
export { Client, Session } from "./client.js";
export type { ClientOptions, MethodName, Params, Result } from "./client.js";
export { Turn } from "./turn.js";
export type { TurnOutcome } from "./turn.js";
export { defaultSocketPath, connectSocket, RUN_SOCKET } from "./socket.js";
export { textBlock, imageBlock, imageMediaType, contentBlocks, contentText, contentImages } from "./content.js";
export type { ImageMediaType } from "./content.js";
export { ToolCancelledError } from "./serve.js";
export type { CancelReason, ServeOptions, ToolCallContext, ToolHandler, ToolHandlers, ToolOutcome } from "./serve.js";
