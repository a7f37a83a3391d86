#!/usr/bin/env python3
"""fineweb.py: FineWeb (or any JSONL of documents) -> llm.c token shards.

The documents go as JSONL into our own C tokenizer (./tokenize --jsonl, built on first
use), which writes shards with llm.c's names and header (256 int32: magic 20240520,
version 1, token count; then uint16 GPT-2 tokens, <|endoftext|> before each document):
the first --shard-size tokens are validation (OUT/fineweb_val_000000.bin), the rest
training (OUT/fineweb_train_000001.bin, fineweb_train_000002.bin, ...), as llm.c's
dev/data/fineweb.py names them, so the trainers take
-i "OUT/fineweb_train_*.bin" -j "OUT/fineweb_val_*.bin".

Online: FineWeb's 10B-token sample, streamed from Hugging Face (needs internet and the
`datasets` package: pip install datasets).

Offline: --from-jsonl FILE reads the documents from a local JSONL file instead (one JSON
object per line with the document in its "text" field, as FineWeb's own files and
`datasets`' to_json write them; blank lines are skipped; "-" reads standard input). No
internet and no `datasets` needed. Give a --shard-size that leaves the train shards more
tokens than the val shard (tokenize warns otherwise).

    python3 dev/data/fineweb.py                       # 10B sample -> dev/data/fineweb10B/
    python3 dev/data/fineweb.py --max-docs 10000      # a quick partial download
    python3 dev/data/fineweb.py --from-jsonl docs.jsonl --out data/mine --shard-size 1000000
"""
import argparse
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def jsonl_docs(path):
    """Documents of a local JSONL file: the "text" string of each non-blank line."""
    f = sys.stdin if path == "-" else open(path, encoding="utf-8")
    with f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"error: {path}:{lineno}: not JSON: {e}")
            if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
                sys.exit(f'error: {path}:{lineno}: no "text" string in the object')
            yield doc


def download_docs():
    """FineWeb's 10B sample, streamed; exits with how to go offline when it cannot."""
    try:
        from datasets import load_dataset
    except ImportError:
        sys.exit("error: downloading FineWeb needs the 'datasets' package (pip install datasets) and internet.\n"
                 "Offline, tokenize a local JSONL of documents instead: --from-jsonl FILE (see --help)")
    try:
        return load_dataset("HuggingFaceFW/fineweb", name="sample-10BT", split="train", streaming=True)
    except Exception as e:  # no network, hub errors: datasets raises many kinds
        sys.exit(f"error: cannot open FineWeb on Hugging Face ({type(e).__name__}: {e}).\n"
                 "Offline, tokenize a local JSONL of documents instead: --from-jsonl FILE (see --help)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "fineweb10B"), help="output folder (default %(default)s)")
    ap.add_argument("--shard-size", type=int, default=100_000_000, help="tokens per shard (default %(default)s)")
    ap.add_argument("--max-docs", type=int, default=-1, help="stop after this many documents")
    ap.add_argument("--from-jsonl", default=None, metavar="FILE",
                    help='offline: tokenize this local JSONL file ({"text": ...} per line; - = stdin) '
                         "instead of downloading")
    args = ap.parse_args()

    # The documents first: a source that cannot be opened stops here, before tokenize
    # starts (else it would report an empty input on top of the real error).
    if args.from_jsonl and args.from_jsonl != "-" and not os.path.isfile(args.from_jsonl):
        sys.exit(f"error: --from-jsonl {args.from_jsonl}: no such file")
    docs = jsonl_docs(args.from_jsonl) if args.from_jsonl else download_docs()

    tokenize = os.path.join(ROOT, "tokenize")
    if not os.access(tokenize, os.X_OK):
        subprocess.run(["make", "-C", ROOT, "tokenize"], check=True)
    # a run again into the same folder writes the data set anew (an earlier run's shards,
    # whole or cut short, are removed first rather than mixed with the new ones)
    cmd = [tokenize, "--jsonl", "--val-first", "--shard-size", str(args.shard_size), "--overwrite",
           "-o", os.path.join(args.out, "fineweb")]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True, encoding="utf-8")

    n = 0
    try:
        for doc in docs:
            proc.stdin.write(json.dumps({"text": doc["text"]}, ensure_ascii=False) + "\n")
            n += 1
            if n == args.max_docs:
                break
    except BrokenPipeError:
        pass
    except BaseException as e:
        # The source failed part way (a dropped connection, a bad line): tokenize must not
        # write the documents so far as if they were all.
        # Killed, it leaves the shards it staged (NAME.partial, and the temp file of the one
        # it was writing; no -i pattern takes them) and none under a shard's name: removed here.
        proc.kill()
        proc.wait()
        for f in glob.glob(os.path.join(glob.escape(args.out), "fineweb_*.bin.partial*")):
            os.remove(f)
        if isinstance(e, SystemExit):
            raise
        sys.exit(f"error: reading the documents failed after {n} of them ({type(e).__name__}: {e}); "
                 f"tokenize was stopped before any shard took its name in {args.out}")
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass
    if proc.wait() != 0:
        sys.exit(f"error: tokenize exited with status {proc.returncode} after {n} documents")
    print(f"{n} documents tokenized into {args.out}")


if __name__ == "__main__":
    main()
