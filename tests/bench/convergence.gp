# convergence.gp: validation loss vs updates, solo --delay 3,2,1,0 per --staleness mode.
# gnuplot -e "dir='DATA_DIR'; out='FILE.png'" convergence.gp
# (dir holds p-base.dat, p-none.dat, p-predict.dat, p-predict+ramp.dat: "update val_loss" per line)
set terminal pngcairo size 800,500 font "sans,11"
set output out
set title "Validation loss vs updates, gpt-tiny, 4 stages, micro 1, delays 3,2,1,0"
set xlabel "updates"
set ylabel "validation loss"
set grid
set key top right
set yrange [2.4:4.5]
plot dir."/p-base.dat" using 1:2 with lines lw 2 title "no delay", \
     dir."/p-none.dat" using 1:2 with lines lw 2 title "--staleness none", \
     dir."/p-predict.dat" using 1:2 with lines lw 2 title "predict", \
     dir."/p-predict+ramp.dat" using 1:2 with lines lw 2 title "predict+ramp (default)"
