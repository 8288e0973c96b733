# scale.gp: brigade sim at 10, 100, 1000 nodes (bench_scale.sh).
# gnuplot -e "dir='DATA_DIR'; out='FILE.png'" scale.gp
# (dir holds c0.1.dat and c0.01.dat: "nodes control_B_per_node_s pct_of_compute_bound sim_s_per_cpu_s" per line)
set terminal pngcairo size 1200,420 font "sans,10"
set output out
set multiplot layout 1,3 title "brigade sim: gpt-small, 8 stages, modelled compute, churn 10% and 1% of the nodes per hour"
set logscale x
set xrange [7:1400]
set xlabel "nodes"
set grid
set key bottom right
set title "gossip + heartbeat bytes per node per second"
set yrange [0:*]
plot dir."/c0.1.dat" using 1:2 with linespoints lw 2 pt 7 title "churn 10%/h", \
     dir."/c0.01.dat" using 1:2 with linespoints lw 2 pt 5 title "churn 1%/h"
set title "throughput, % of the compute bound"
set yrange [0:100]
plot dir."/c0.1.dat" using 1:3 with linespoints lw 2 pt 7 title "churn 10%/h", \
     dir."/c0.01.dat" using 1:3 with linespoints lw 2 pt 5 title "churn 1%/h"
set title "simulator speed, simulated s per CPU s"
set logscale y
set yrange [*:*]
set key top right
plot dir."/c0.1.dat" using 1:4 with linespoints lw 2 pt 7 title "churn 10%/h", \
     dir."/c0.01.dat" using 1:4 with linespoints lw 2 pt 5 title "churn 1%/h"
unset multiplot
