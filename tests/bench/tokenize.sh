#!/usr/bin/env bash
# tupe-tokenize against Hugging Face `tokenizers` (PyPI), on the same 104 MB corpus in the same
# run: WordPiece encoding with the bert-base-uncased vocabulary (encode_batch, same thread
# count, 1 and 2 threads) and 32k WordPiece training (BertWordPieceTokenizer.train, i.e.
# WordPieceTrainer: time and peak memory). Markdown rows on stdout, details on stderr.
#
# Needs: python3 with `tokenizers`, zstd, GNU time (/usr/bin/time).
# TUPE_BENCH_BYTES=N uses only the first N bytes of the corpus (quick runs).
set -u
: "${TUPE_BIN:?run through make bench}" "${TUPE_DATA:?}"
P=$TUPE_BIN/tupe-tokenize
V=$TUPE_DATA/vocab/bert-base-uncased-vocab.txt
W=$(mktemp -d "${TMPDIR:-/tmp}/tupe-bench-tokenize.XXXXXX")
trap 'rm -rf "$W"' EXIT
python3 -c 'import tokenizers' 2>/dev/null || { echo "tokenize bench: python3 -m pip install tokenizers" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "tokenize bench: GNU time (/usr/bin/time) is needed" >&2; exit 1; }

zstd -dc "$TUPE_DATA/corpus/debian-104m.txt.zst" | head -c "${TUPE_BENCH_BYTES:-1000000000}" >"$W/corpus.txt"
bytes=$(wc -c <"$W/corpus.txt")
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')
echo "tokenize bench: $mb MB, tokenizers $(python3 -c 'import tokenizers; print(tokenizers.__version__)'), $(nproc) cores" >&2

cat >"$W/hf_encode.py" <<'EOF'
import sys
from tokenizers import BertWordPieceTokenizer
tok = BertWordPieceTokenizer(sys.argv[1], lowercase=True)
n = 0
with open(sys.argv[2], encoding="utf-8") as f:
    lines = f.read().split("\n")
for i in range(0, len(lines), 10000):
    for enc in tok.encode_batch(lines[i:i + 10000], add_special_tokens=False):
        n += len(enc.ids)
print(n, file=sys.stderr)
EOF
cat >"$W/hf_train.py" <<'EOF'
import sys
from tokenizers import BertWordPieceTokenizer
tok = BertWordPieceTokenizer(lowercase=True)
tok.train([sys.argv[1]], vocab_size=32768, min_frequency=2, limit_alphabet=1000,
          show_progress=False, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
tok.save_model(sys.argv[2])
EOF

# timed CMD...: runs it under GNU time; sets wall (s), cpu (user+sys s), rss (KB)
timed() {
    /usr/bin/time -f "%e %U %S %M" -o "$W/time" "$@" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; return 1; }
    read -r wall user sys rss <"$W/time"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
}
rate() { awk -v b="$bytes" -v t="$1" 'BEGIN { printf "%.1f", (t > 0 ? b / 1e6 / t : 0) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

for th in 1 2; do
    timed "$P" encode -q --threads $th --vocab "$V" -o "$W/ours.tok" "$W/corpus.txt" || exit 1
    ours_wall=$wall ours_cpu=$cpu
    timed env RAYON_NUM_THREADS=$th TOKENIZERS_PARALLELISM=true python3 "$W/hf_encode.py" "$V" "$W/corpus.txt" || exit 1
    hf_wall=$wall hf_cpu=$cpu
    o=$(rate "$ours_wall") h=$(rate "$hf_wall")
    echo "encode, $th thread(s): ours $ours_wall s wall / $ours_cpu s CPU; Hugging Face $hf_wall s / $hf_cpu s" >&2
    echo "| encode $mb MB, bert-base-uncased, $th thread(s), MB/s | $o | $h | $(ratio "$o" "$h") |"
    if [ $th = 1 ]; then
        oc=$(rate "$ours_cpu") hc=$(rate "$hf_cpu")
        echo "| encode, MB/s per core (CPU time) | $oc | $hc | $(ratio "$oc" "$hc") |"
    fi
done
# the command behind the rows above:
echo "encode: $P encode -q --threads N --vocab $V -o out.tok corpus.txt" >&2

timed "$P" train -q --threads 2 --vocab-size 32768 -o "$W/ours.vocab" "$W/corpus.txt" || exit 1
ours_wall=$wall ours_rss=$rss
mkdir -p "$W/hf"
timed env RAYON_NUM_THREADS=2 TOKENIZERS_PARALLELISM=true python3 "$W/hf_train.py" "$W/corpus.txt" "$W/hf" || exit 1
hf_wall=$wall hf_rss=$rss
common=$(sort "$W/ours.vocab" | comm -12 - <(sort "$W/hf/vocab.txt") | wc -l)
echo "train: ours $ours_wall s, $ours_rss KB; Hugging Face $hf_wall s, $hf_rss KB; $common of $(wc -l <"$W/hf/vocab.txt") tokens in common" >&2
echo "train: $P train -q --threads 2 --vocab-size 32768 -o vocab.txt corpus.txt" >&2
echo "| train 32k WordPiece on $mb MB, 2 threads, seconds | $ours_wall | $hf_wall | $(ratio "$ours_wall" "$hf_wall") |"
echo "| train 32k WordPiece, peak memory MB | $((ours_rss / 1024)) | $((hf_rss / 1024)) | $(ratio "$ours_rss" "$hf_rss") |"
