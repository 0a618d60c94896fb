# Shell functions the bench scripts share (sourced, not run).

# wait_for_port PORT [SECONDS]: waits up to SECONDS (default 10) for something to accept
# connections on 127.0.0.1:PORT; fails if nothing does.
wait_for_port() {
  for _ in $(seq $((${2:-10} * 20))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
