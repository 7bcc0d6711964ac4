// Unit tests of the line framing and the stderr tail, with the chunk
// boundaries a pipe may produce.

import assert from "node:assert/strict";
import { test } from "node:test";

import { LineDecoder, TailBuffer } from "../src/index.js";

test("lines split across chunks are joined, several lines in one chunk are split", () => {
  const decoder = new LineDecoder();
  assert.deepEqual(decoder.push(Buffer.from('{"a":')), []);
  assert.deepEqual(decoder.push(Buffer.from("1")), []);
  assert.deepEqual(decoder.push(Buffer.from('}\n{"b":2}\n{"c"')), ['{"a":1}', '{"b":2}']);
  assert.deepEqual(decoder.push(Buffer.from(":3}\n")), ['{"c":3}']);
  assert.equal(decoder.end(), undefined);
});

test("a UTF-8 character split between chunks is decoded whole", () => {
  const bytes = Buffer.from('"\u00e9\u4e2d\u{1f600}"\n');
  for (let cut = 1; cut < bytes.length; cut++) {
    const decoder = new LineDecoder();
    const lines = [...decoder.push(bytes.subarray(0, cut)), ...decoder.push(bytes.subarray(cut))];
    assert.deepEqual(lines, ['"\u00e9\u4e2d\u{1f600}"'], `cut at byte ${cut}`);
  }
});

test("an unterminated last line is returned at the end", () => {
  const decoder = new LineDecoder();
  assert.deepEqual(decoder.push(Buffer.from("one\ntwo")), ["one"]);
  assert.equal(decoder.end(), "two");
});

test("the stderr tail keeps only the last characters", () => {
  const tail = new TailBuffer(10);
  tail.write("0123456789");
  tail.write("abc");
  assert.equal(tail.toString(), "3456789abc");
  for (let index = 0; index < 1000; index++) tail.write("x");
  assert.equal(tail.toString(), "x".repeat(10));
  const none = new TailBuffer(0);
  none.write("lost");
  assert.equal(none.toString(), "");
});
