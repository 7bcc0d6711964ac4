// Newline-delimited framing of the sidecar's stdout: bytes in, complete
// lines out. It decodes UTF-8 across chunk boundaries and joins lines split
// over many chunks without rescanning what it already holds; it does not
// parse JSON.

import { StringDecoder } from "node:string_decoder";

/** Splits a byte stream into `\n`-terminated UTF-8 lines. */
export class LineDecoder {
  readonly #decoder = new StringDecoder("utf8");
  #parts: string[] = [];

  /** Feeds one chunk; returns the lines it completed, without their `\n`. */
  push(chunk: Buffer | string): string[] {
    const text = typeof chunk === "string" ? chunk : this.#decoder.write(chunk);
    const lines: string[] = [];
    let start = 0;
    for (let newline = text.indexOf("\n"); newline !== -1; newline = text.indexOf("\n", start)) {
      this.#parts.push(text.slice(start, newline));
      lines.push(this.#parts.join(""));
      this.#parts = [];
      start = newline + 1;
    }
    if (start < text.length) this.#parts.push(text.slice(start));
    return lines;
  }

  /** What is left after the stream ended: an unterminated last line, if any. */
  end(): string | undefined {
    const rest = this.#decoder.end();
    if (rest.length > 0) this.#parts.push(rest);
    const line = this.#parts.join("");
    this.#parts = [];
    return line.length > 0 ? line : undefined;
  }
}

/** Keeps the last `limit` characters written to it. */
export class TailBuffer {
  readonly #limit: number;
  #chunks: string[] = [];
  #length = 0;

  constructor(limit: number) {
    this.#limit = Math.max(0, limit);
  }

  /** Appends text, dropping the oldest beyond the limit. */
  write(text: string): void {
    if (this.#limit === 0 || text.length === 0) return;
    this.#chunks.push(text);
    this.#length += text.length;
    while (this.#chunks.length > 1 && this.#length - (this.#chunks[0]?.length ?? 0) >= this.#limit) {
      this.#length -= this.#chunks.shift()?.length ?? 0;
    }
  }

  /** The retained text, at most `limit` characters. */
  toString(): string {
    const text = this.#chunks.join("");
    return text.length > this.#limit ? text.slice(text.length - this.#limit) : text;
  }
}
