/* The syscall counter used for h100_census_20261127_ptrace.txt (the GPU machine has no strace): runs argv[1..]
   under ptrace, follows every thread and child, counts system-call entries by number (as strace -f -c does),
   prints 'COUNTS read write poll mmap munmap ioctl total' on stderr. x86-64 only. cc -O1 -o cnt syscall_counter.c */
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <sys/user.h>
#include <unistd.h>
#include <stdio.h>
#include <signal.h>
static long n[512];static char in[1<<22];
int main(int c,char**v){pid_t p=fork(),t;int s;
if(!p){ptrace(PTRACE_TRACEME,0,0,0);raise(SIGSTOP);execvp(v[1],v+1);_exit(127);}
waitpid(p,&s,0);ptrace(PTRACE_SETOPTIONS,p,0,PTRACE_O_TRACESYSGOOD|PTRACE_O_TRACECLONE|PTRACE_O_TRACEFORK|PTRACE_O_TRACEVFORK|PTRACE_O_EXITKILL);
ptrace(PTRACE_SYSCALL,p,0,0);
while((t=waitpid(-1,&s,__WALL))>0){if(!WIFSTOPPED(s))continue;int g=WSTOPSIG(s),q=0;
if(g==(SIGTRAP|0x80)){if(!in[t]){struct user_regs_struct r;ptrace(PTRACE_GETREGS,t,0,&r);if(r.orig_rax<512)n[r.orig_rax]++;}in[t]^=1;}
else if(g!=SIGTRAP&&g!=SIGSTOP)q=g;ptrace(PTRACE_SYSCALL,t,0,q);}
long T=0;for(int i=0;i<512;i++)T+=n[i];
fprintf(stderr,"COUNTS %ld %ld %ld %ld %ld %ld %ld\n",n[0],n[1],n[7],n[9],n[11],n[16],T);}
