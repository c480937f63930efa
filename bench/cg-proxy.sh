#!/bin/bash
# cg-proxy.sh KIND PATH [SECS]: callgrind instructions per proxied request (single-process proxy, nginx backend, keep-alive wrk -c4)
KIND=${1:-gyre}; P=${2:-/ka/r}; SECS=${3:-3}
cd "$(dirname "$0")" && GYRE=${GYRE:-../target/release/gyre} timeout 400 python3 -c "
import bench,proxy,os,subprocess,signal,sys,time
b=proxy.backend(bench)
s=bench.Server('$KIND',1,main='master_process off;',http=proxy.proxy_http(b.port,bench.free_port()),server=proxy.PROXY_SERVER); s.write_conf()
out='/tmp/cg-proxy-$KIND.out'
p=subprocess.Popen(['valgrind','--tool=callgrind','--callgrind-out-file='+out,*s.cmd()],stdin=subprocess.DEVNULL,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL,start_new_session=True)
bench.wait_for(lambda: bench.http_get(s.port)==200,60)
bench.wrk(s.url('$P'),secs=1,conns=4,latency=False)
subprocess.run(['callgrind_control','-z',str(p.pid)],capture_output=True)
r=bench.wrk(s.url('$P'),secs=$SECS,conns=4,latency=False)
p.send_signal(signal.SIGQUIT); p.wait(60)
print(r['reqs'])
" > /tmp/cg-proxy.reqs 2>/tmp/cg-proxy.err
n=$(tail -1 /tmp/cg-proxy.reqs)
tot=$(callgrind_annotate /tmp/cg-proxy-$KIND.out 2>/dev/null | grep "PROGRAM TOTALS" | awk '{gsub(",","",$1); print $1}')
echo "reqs=$n total=$tot per_req=$((tot/n))"
callgrind_annotate --inclusive=yes /tmp/cg-proxy-$KIND.out 2>/dev/null | awk -v n=$n 'NR>20 && /\(/{v=$1; gsub(",","",v); if (v/n>300) printf "%8.0f %s\n", v/n, $4}' | head -${4:-50}
