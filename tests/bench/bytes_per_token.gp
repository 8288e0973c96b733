# bytes_per_token.gp: bytes on the wire per token trained, by codec.
# gnuplot -e "dir='DATA_DIR'; out='FILE.png'" bytes_per_token.gp
# (dir holds bytes.dat: "codec sent_per_token raw_per_token" per line)
set terminal pngcairo size 800,500 font "sans,11"
set output out
set title "Bytes on the wire per token (gpt-tiny, 4-stage swarm, all nodes)"
set ylabel "bytes per token"
set grid ytics
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set key outside bottom center horizontal
plot dir."/bytes.dat" using 2:xtic(1) title "sent (quantized + zstd)", \
     "" using 3 title "raw fp32 of the same tensors"
