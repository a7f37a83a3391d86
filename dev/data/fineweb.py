#!/usr/bin/env python3
"""fineweb.py: download FineWeb's 10B-token sample and tokenize it into llm.c shards.

Needs internet and the Hugging Face `datasets` package (pip install datasets). The
documents are streamed as JSONL into our own C tokenizer (./tokenize --jsonl), which
writes 100M-token shards with llm.c's naming: the first shard is validation
(fineweb_val_000000.bin), the rest training (fineweb_train_000001.bin, ...).

    python3 dev/data/fineweb.py                       # 10B sample -> dev/data/fineweb10B/
    python3 dev/data/fineweb.py --max-docs 10000      # a quick partial download
    python3 dev/data/fineweb.py --from-jsonl docs.jsonl   # tokenize a local JSONL instead
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "fineweb10B"), help="output folder")
    ap.add_argument("--shard-size", type=int, default=100_000_000, help="tokens per shard")
    ap.add_argument("--max-docs", type=int, default=-1, help="stop after this many documents")
    ap.add_argument("--from-jsonl", default=None, help="tokenize this local JSONL file instead of downloading")
    args = ap.parse_args()

    tokenize = os.path.join(ROOT, "tokenize")
    if not os.access(tokenize, os.X_OK):
        subprocess.run(["make", "-C", ROOT, "tokenize"], check=True)
    os.makedirs(args.out, exist_ok=True)
    cmd = [tokenize, "--jsonl", "--val-first", "--shard-size", str(args.shard_size),
           "-o", os.path.join(args.out, "fineweb")]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True, encoding="utf-8")

    if args.from_jsonl:
        docs = (json.loads(line) for line in open(args.from_jsonl, encoding="utf-8"))
    else:
        try:
            from datasets import load_dataset
        except ImportError:
            sys.exit("error: the 'datasets' package is needed to download FineWeb (pip install datasets)")
        docs = load_dataset("HuggingFaceFW/fineweb", name="sample-10BT", split="train", streaming=True)

    n = 0
    try:
        for doc in docs:
            proc.stdin.write(json.dumps({"text": doc["text"]}, ensure_ascii=False) + "\n")
            n += 1
            if n == args.max_docs:
                break
    except BrokenPipeError:
        pass
    proc.stdin.close()
    if proc.wait() != 0:
        sys.exit(f"error: tokenize exited with status {proc.returncode} after {n} documents")
    print(f"{n} documents tokenized into {args.out}")


if __name__ == "__main__":
    main()
