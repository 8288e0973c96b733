# loss_codecs.gp: training loss vs tokens, solo --stages 4 with fp32 / int8 / int4
# at the cuts.  gnuplot -e "dir='DATA_DIR'; out='FILE.png'; model='gpt-small'" loss_codecs.gp
# (dir holds ct_fp32.dat, ct_int8.dat, ct_int4.dat: "tokens loss" per line)
if (!exists("model")) model = "gpt-small"
set terminal pngcairo size 800,500 font "sans,11"
set output out
set title sprintf("Training loss vs tokens by codec (%s, solo --stages 4)", model)
set xlabel "tokens"
set ylabel "training loss (running mean of 20 updates)"
set grid
set key top right
plot dir."/ct_fp32.dat" using 1:2 with lines lw 2 title "fp32 / fp32", \
     dir."/ct_int8.dat" using 1:2 with lines lw 2 title "int8 / int8", \
     dir."/ct_int4.dat" using 1:2 with lines lw 2 dt 2 title "int4 act / int8 grad"
