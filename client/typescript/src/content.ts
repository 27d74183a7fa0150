// Content blocks of a tool result (PROTOCOL.md §5, Content blocks): the
// Messages API's text and image blocks. The wire types (TextBlock,
// ImageBlock, ContentBlock, ToolResultContent) are generated from
// protocol/schemas; these are helpers to make and read them.
import type { ContentBlock, ImageBlock, ImageSource, TextBlock, ToolResultContent } from "./protocol.js";

export type ImageMediaType = ImageSource["media_type"];

/** A text block. */
export function textBlock(text: string): TextBlock {
  return { type: "text", text };
}

/**
 * The media type of an image by its magic bytes (as the daemon decides it):
 * PNG, JPEG, GIF or WebP; undefined for anything else.
 */
export function imageMediaType(bytes: Uint8Array): ImageMediaType | undefined {
  const b = bytes;
  const starts = (sig: number[], at = 0): boolean => sig.every((v, i) => b[at + i] === v);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (starts([0xff, 0xd8, 0xff])) return "image/jpeg";
  if (starts([0x47, 0x49, 0x46, 0x38]) && (b[4] === 0x37 || b[4] === 0x39) && b[5] === 0x61) return "image/gif";
  if (starts([0x52, 0x49, 0x46, 0x46]) && starts([0x57, 0x45, 0x42, 0x50], 8)) return "image/webp";
  return undefined;
}

/**
 * An image block of these bytes; the media type is found from the bytes
 * when not given. Throws for bytes that are no PNG, JPEG, GIF or WebP.
 */
export function imageBlock(bytes: Uint8Array, mediaType?: ImageMediaType): ImageBlock {
  const type = mediaType ?? imageMediaType(bytes);
  if (type === undefined) throw new TypeError("not a PNG, JPEG, GIF or WebP image (by its first bytes)");
  return { type: "image", source: { type: "base64", media_type: type, data: Buffer.from(bytes).toString("base64") } };
}

/** A result's content as blocks: a string is one text block (none when empty). */
export function contentBlocks(content: ToolResultContent): ContentBlock[] {
  if (typeof content !== "string") return content;
  return content === "" ? [] : [textBlock(content)];
}

/**
 * The text of a result's content: a string as it is, blocks' texts joined
 * by newlines, each image as `[image MEDIA_TYPE]`.
 */
export function contentText(content: ToolResultContent): string {
  if (typeof content === "string") return content;
  return content.map((b) => (b.type === "text" ? b.text : `[image ${b.source.media_type}]`)).join("\n");
}

/** The decoded bytes of each image block of a result's content, in order. */
export function contentImages(content: ToolResultContent): { mediaType: ImageMediaType; bytes: Buffer }[] {
  if (typeof content === "string") return [];
  return content.flatMap((b) =>
    b.type === "image" ? [{ mediaType: b.source.media_type, bytes: Buffer.from(b.source.data, "base64") }] : [],
  );
}
