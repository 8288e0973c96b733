# throughput_latency.gp: swarm tokens/s vs emulated one-way latency, async vs gpipe.
# gnuplot -e "dir='DATA_DIR'; out='FILE.png'" throughput_latency.gp
# (dir holds lat.dat: "latency_ms async_tok_s gpipe_tok_s" per line)
set terminal pngcairo size 800,500 font "sans,11"
set output out
set title "Swarm throughput vs emulated latency (gpt-tiny, 4 stages, 50 Mbit/s)"
set xlabel "emulated latency per message, ms"
set ylabel "tokens/s"
set grid
set key bottom left box opaque
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
set xrange [-5:105]
plot dir."/lat.dat" using 1:2 with linespoints lw 2 pt 7 title "async", \
     dir."/lat.dat" using 1:3 with linespoints lw 2 pt 5 title "gpipe"
