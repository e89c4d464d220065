#include <mpi.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){int p;MPI_Init_thread(&c,&v,MPI_THREAD_MULTIPLE,&p);int r;MPI_Comm_rank(MPI_COMM_WORLD,&r);
 uint64_t *base; MPI_Win w; MPI_Win_allocate(4096,1,MPI_INFO_NULL,MPI_COMM_WORLD,&base,&w);
 base[0]=0; MPI_Barrier(MPI_COMM_WORLD); MPI_Win_lock_all(MPI_MODE_NOCHECK,w);
 int N=100000;
 if(r==1){ /* target: busy loop storing a counter, calling MPI_Iprobe now and then, never blocking */
   volatile uint64_t *t=base; int flag; uint64_t i=0; double t0=now();
   while(1){ i++; __atomic_store_n(&base[0],i,__ATOMIC_RELEASE); if(__atomic_load_n(&base[1],__ATOMIC_ACQUIRE)) break;
     if((i&7)==0) MPI_Iprobe(MPI_ANY_SOURCE,99,MPI_COMM_WORLD,&flag,MPI_STATUS_IGNORE);}
   printf("target loop %lu iters %.2fs\n",i,now()-t0);
 } else {
   uint64_t val=0,last=0; int bad=0; double t0=now();
   for(int k=0;k<N;k++){ MPI_Request q; MPI_Rget(&val,8,MPI_BYTE,1,0,8,MPI_BYTE,w,&q); int f=0; long spins=0; while(!f){MPI_Test(&q,&f,MPI_STATUS_IGNORE);spins++;}
     if(val<last) bad++; last=val; }
   double dt=now()-t0; printf("origin: %d Rget+Test rounds in %.3fs = %.2f us each, last value %lu, nonmonotone %d\n",N,dt,dt/N*1e6,last,bad);
   uint64_t one=1; MPI_Put(&one,8,MPI_BYTE,1,8,8,MPI_BYTE,w); MPI_Win_flush(1,w);
 }
 MPI_Win_unlock_all(w); MPI_Win_free(&w); MPI_Finalize();}
