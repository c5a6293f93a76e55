# Training and validation loss of a tupe-pretrain run, as a PNG.
#
#   gnuplot -e "metrics='RUN/metrics.jsonl'; out='loss.png'" /usr/local/share/tupe/plot-loss.gp
#
# metrics.jsonl has one JSON object per line; each starts with "step". Training lines carry
# "loss", validation lines "val_loss" (both in nats). awk pulls the two columns out.
if (!exists("metrics")) metrics = "metrics.jsonl"
if (!exists("out")) out = "loss.png"
if (!exists("title")) title = metrics

extract(key) = "< awk 'match($0, /\"step\":[0-9]+/) { s = substr($0, RSTART + 7, RLENGTH - 7) } " . \
               "match($0, /\"" . key . "\":[-+0-9.eE]+/) { print s, substr($0, RSTART + " . \
               (strlen(key) + 3) . ", RLENGTH - " . (strlen(key) + 3) . ") }' '" . metrics . "'"

set terminal pngcairo size 900,540 font "DejaVu Sans,10"
set output out
set title title noenhanced
set xlabel "step"
set ylabel "masked-LM loss (nats)"
set grid
set key top right
plot extract("loss") using 1:2 with lines linewidth 2 title "training", \
     extract("val_loss") using 1:2 with linespoints pointtype 7 linewidth 2 title "validation"
