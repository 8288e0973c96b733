# simreal.gp: validation loss vs updates, a real 4-process swarm (twice) and brigade sim --compute real.
# gnuplot -e "dir='DATA_DIR'; out='FILE.png'" simreal.gp
# (dir holds real1.dat, real2.dat, sim.dat: "version val_loss" per line)
set terminal pngcairo size 800,500 font "sans,11"
set output out
set title "Validation loss, gpt-tiny demo config (4 stages, int8, seed 1): real swarm vs brigade sim"
set xlabel "updates (weight version of the last stage)"
set ylabel "validation loss"
set grid
set key top right
plot dir."/real1.dat" using 1:2 with linespoints lw 2 pt 7 title "real swarm, run 1", \
     dir."/real2.dat" using 1:2 with linespoints lw 2 pt 5 title "real swarm, run 2", \
     dir."/sim.dat" using 1:2 with linespoints lw 2 pt 9 dt 2 title "brigade sim --compute real"
