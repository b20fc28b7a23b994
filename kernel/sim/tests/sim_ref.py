#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Random-case check of metainfer_sim's integer ops against a reference.

The reference below is written from the "Integer arithmetic" section and
the op comments of uapi/drm/metainfer_accel.h, in plain Python integers
(exact), independently of the C code.  Each case runs `sim_ut op`, which
compiles the sim's mi_sim_exec.c unchanged, and compares every output
element.  Usage: sim_ref.py SIM_UT [SEED [CASES]]
"""
import random, subprocess, sys
I8,U8,I16,I32=1,2,3,4
PLAIN,NCHW,NHWC=0,1,2
RNG={I8:(-128,127),U8:(0,255),I16:(-32768,32767),I32:(-2**31,2**31-1)}
M64=(1<<64)-1
def w64(v):
    v&=M64
    return v-(1<<64) if v>>63 else v
def w32(v):
    v&=0xffffffff
    return v-(1<<32) if v>>31 else v
def rsr(v,s):
    if s==0: return v
    return w64(v+(1<<(s-1)))>>s
def requant(acc,M,S,zp,lo,hi):
    t=min(max(31-S,0),62)
    v=w64(acc*M)
    v=rsr(v,t)+zp
    return min(max(v,lo),hi)

class T:
    def __init__(s,slot,dtype,layout,shape,strided=False,bcast=()):
        s.slot,s.dtype,s.layout,s.shape=slot,dtype,layout,list(shape)
        s.ndim=len(shape)
        if strided:
            # padded strides: innermost stride 1 or 2, each outer adds slack
            st=[0]*s.ndim; acc=random.choice([1,2])
            for k in range(s.ndim-1,-1,-1):
                st[k]=acc; acc=acc*shape[k]+random.choice([0,1,3])
            # broadcast dims: stride 0 (not all of them: all-zero is dense)
            if bcast and len(bcast)<s.ndim:
                for k in bcast: st[k]=0
            s.stride=st
        else:
            s.stride=[0]*s.ndim
        ds=[0]*s.ndim; d=1
        for k in range(s.ndim-1,-1,-1): ds[k]=d; d*=shape[k]
        s.eff=[x if any(s.stride) else y for x,y in zip(s.stride,ds)]
        n=1+sum((shape[k]-1)*s.eff[k] for k in range(s.ndim))
        lo,hi=RNG[dtype]
        s.buf=[random.randint(lo,hi) for _ in range(n)]
        if layout==NHWC: p=[0,3,1,2]; s.dim=[shape[i] for i in p]; s.ls=[s.eff[i] for i in p]
        else:
            off=4-s.ndim; s.dim=[1]*4; s.ls=[0]*4
            for k in range(s.ndim): s.dim[k+off]=shape[k]; s.ls[k+off]=s.eff[k]
    def idx(s,n,c,h,w): return n*s.ls[0]+c*s.ls[1]+h*s.ls[2]+w*s.ls[3]
    def get(s,n,c,h,w): return s.buf[s.idx(n,c,h,w)]
    def put(s,n,c,h,w,v): s.buf[s.idx(n,c,h,w)]=v
    def text(s):
        st=s.stride+[0]*(4-s.ndim); sh=s.shape+[0]*(4-s.ndim)
        return "%d %d %d %d %s %s %d %s"%(s.slot,s.dtype,s.layout,s.ndim," ".join(map(str,sh))," ".join(map(str,st)),len(s.buf)," ".join(map(str,s.buf)))
    def logical(s):
        out=[]
        for a in range(s.dim[0]):
            for b in range(s.dim[1]):
                for c in range(s.dim[2]):
                    for d in range(s.dim[3]): out.append(s.get(a,b,c,d))
        return out

def act4(layout,n,c,h,w):
    return [n,c,h,w] if layout!=NHWC else [n,h,w,c]

def run(opcode,flags,lo,hi,params,tensors):
    txt="%d %d %d %d %d %s\n"%(4+len(params),opcode,flags,lo,hi," ".join(str(p & 0xffffffff) for p in params))
    txt+="\n".join(t.text() for t in tensors)+"\n-1\n"
    r=subprocess.run([HARNESS,"op"],input=txt,capture_output=True,text=True)
    lines=r.stdout.split()
    assert lines[0]=="ret", r.stdout[:200]+r.stderr
    return int(lines[1]),[int(x) for x in lines[2:]]

def rq_bounds(dt,amin,amax):
    lo,hi=RNG[dt]; return max(lo,amin),min(hi,amax)

def case_conv():
    lay=random.choice([NCHW,NHWC]); N=random.randint(1,2)
    groups=random.choice([1,1,2,3,'dw'])
    if groups=='dw': C=random.randint(1,5); groups=C; OC=C*random.choice([1,2])
    else: C=groups*random.randint(1,3); OC=groups*random.randint(1,3)
    H,W=random.randint(1,7),random.randint(1,7)
    KH,KW=random.randint(1,3),random.randint(1,3)
    sh,sw=random.randint(1,2),random.randint(1,2); dh,dw=random.randint(1,2),random.randint(1,2)
    pt,pl,pb,pr=[random.randint(0,2) for _ in range(4)]
    OH=(H+pt+pb-dh*(KH-1)-1)//sh+1; OW=(W+pl+pr-dw*(KW-1)-1)//sw+1
    if OH<1 or OW<1: return None
    xdt=random.choice([I8,U8,I16]); wdt=random.choice([I8,I16])
    bias=random.random()<0.7; rq=random.random()<0.6
    ydt=random.choice([I8,U8,I16,I32]) if rq else I32
    izp=random.randint(-20,20); wzp=random.randint(-5,5)
    ozp=random.randint(-10,10); amin=random.randint(-300,0); amax=random.randint(0,300)
    if not rq: ozp=amin=amax=0
    strided=random.random()<0.5
    x=T(0,xdt,lay,act4(lay,N,C,H,W),strided)
    w=T(1,wdt,lay,act4(lay,OC,C//groups,KH,KW),strided)
    ts=[x,w]
    if bias: b=T(2,I32,PLAIN,[OC]); b.buf=[random.randint(-5000,5000) for _ in b.buf]; ts.append(b)
    y=T(3,ydt,lay,act4(lay,N,OC,OH,OW),strided); ts.append(y)
    if rq:
        per=random.random()<0.5; L=OC if per else 1
        m=T(4,I32,PLAIN,[L]); m.buf=[random.randint(1<<29,(1<<31)-1) for _ in m.buf]
        s=T(5,I32,PLAIN,[L]); s.buf=[random.choice([random.randint(-12,3),30,31,29]) for _ in s.buf]
        ts+=[m,s]
    lo,hi=rq_bounds(ydt,amin,amax) if rq else RNG[I32]
    if rq and lo>hi: return None
    fl=(1 if bias else 0)|(2 if rq else 0)
    params=[sh,sw,dh,dw,pt,pl,pb,pr,groups,0,izp,wzp,ozp,amin,amax,0]
    ret,got=run(1,fl,lo,hi,params,ts)
    icg=C//groups; ocg=OC//groups; exp=[]
    for n in range(N):
        for oc in range(OC):
            for oh in range(OH):
                for ow in range(OW):
                    acc=b.buf[oc*b.ls[3]] if bias else 0
                    g=oc//ocg
                    for ic in range(icg):
                        for kh in range(KH):
                            ih=oh*sh-pt+kh*dh
                            if ih<0 or ih>=H: continue
                            for kw in range(KW):
                                iw=ow*sw-pl+kw*dw
                                if iw<0 or iw>=W: continue
                                acc+= (x.get(n,g*icg+ic,ih,iw)-izp)*(w.get(oc,ic,kh,kw)-wzp)
                    acc=w32(acc)
                    if rq:
                        M=m.buf[0 if len(m.buf)==1 and m.shape[0]==1 else oc]; S=s.buf[0 if s.shape[0]==1 else oc]
                        acc=requant(acc,M,S,ozp,lo,hi)
                    exp.append(acc)
    return ret,got,exp

def case_gemm():
    M,K,N=random.randint(1,6),random.randint(1,9),random.randint(1,6)
    adt=random.choice([I8,U8,I16]); bdt=random.choice([I8,U8,I16])
    a=T(0,adt,PLAIN,[M,K],random.random()<0.5); b=T(1,bdt,PLAIN,[K,N],random.random()<0.5)
    bias=random.random()<0.5; rq=random.random()<0.5
    ydt=random.choice([I8,U8,I16,I32]) if rq else I32
    azp,bzp=random.randint(-9,9),random.randint(-9,9)
    ozp=random.randint(-10,10); amin,amax=-1000,1000
    if not rq: ozp=amin=amax=0
    ts=[a,b]
    if bias: bt=T(2,I32,PLAIN,[N]); ts.append(bt)
    y=T(3,ydt,PLAIN,[M,N],random.random()<0.5); ts.append(y)
    if rq:
        L=N if random.random()<0.5 else 1
        m=T(4,I32,PLAIN,[L]); m.buf=[random.randint(-(1<<31),(1<<31)-1) for _ in m.buf]
        s=T(5,I32,PLAIN,[L]); s.buf=[random.choice([random.randint(-40,40),30,31]) for _ in s.buf]
        ts+=[m,s]
    lo,hi=rq_bounds(ydt,amin,amax) if rq else RNG[I32]
    fl=(1 if bias else 0)|(2 if rq else 0)
    ret,got=run(2,fl,lo,hi,[azp,bzp,ozp,amin,amax,0],ts)
    exp=[]
    for i in range(M):
        for j in range(N):
            acc=bt.get(0,0,0,j) if bias else 0
            for k in range(K): acc+=(a.get(0,0,i,k)-azp)*(b.get(0,0,k,j)-bzp)
            acc=w32(acc)
            if rq: acc=requant(acc,m.buf[0 if m.shape[0]==1 else j],s.buf[0 if s.shape[0]==1 else j],ozp,lo,hi)
            exp.append(acc)
    return ret,got,exp

def case_elt():
    op=random.choice([3,4]); lay=random.choice([PLAIN,NCHW,NHWC])
    if lay==PLAIN: shape=[random.randint(1,5) for _ in range(random.randint(1,4))]
    else: shape=[random.randint(1,3) for _ in range(4)]
    adt,bdt,ydt=[random.choice([I8,U8,I16,I32]) for _ in range(3)]
    bc=tuple(k for k in range(len(shape)) if random.random()<0.3) if random.random()<0.4 else ()
    a=T(0,adt,lay,shape,random.random()<0.5); b=T(1,bdt,lay,shape,bool(bc) or random.random()<0.5,bc)
    y=T(3,ydt,lay,shape,random.random()<0.5)
    azp,bzp=random.randint(-50,50),random.randint(-50,50)
    am=random.choice([1,3,random.randint(-(1<<31),(1<<31)-1)]); bm=random.choice([1,-1,random.randint(-(1<<31),(1<<31)-1)]) if op==3 else 0
    sh=random.choice([0,1,2,random.randint(0,62)]); ozp=random.randint(-10,10); amin=random.randint(-(1<<31),0); amax=random.randint(0,(1<<31)-1)
    lo,hi=rq_bounds(ydt,amin,amax)
    ret,got=run(op,0,lo,hi,[azp,bzp,am,bm,sh,0,ozp,amin,amax,0],[a,b,y])
    exp=[]
    for n in range(y.dim[0]):
        for c in range(y.dim[1]):
            for h in range(y.dim[2]):
                for w in range(y.dim[3]):
                    av=a.get(n,c,h,w)-azp; bv=b.get(n,c,h,w)-bzp
                    v=w64(av*am+bv*bm) if op==3 else w64(av*bv*am)
                    v=w64(rsr(v,sh)+ozp)
                    exp.append(min(max(v,lo),hi))
    return ret,got,exp

def case_clip():
    op=random.choice([5,6]); lay=random.choice([PLAIN,NCHW,NHWC]); dt=random.choice([I8,U8,I16,I32])
    shape=[random.randint(1,4) for _ in range(4 if lay else random.randint(1,4))]
    x=T(0,dt,lay,shape,random.random()<0.5); y=T(3,dt,lay,shape,random.random()<0.5)
    mn=random.randint(-100,100); mx=0 if op==5 else mn+random.randint(0,100)
    lo,hi=RNG[dt]; lo=max(lo,mn); hi=hi if op==5 else min(hi,mx)
    if lo>hi: return None
    ret,got=run(op,0,lo,hi,[mn,mx],[x,y])
    exp=[min(max(v,mn),mx) if op==6 else max(v,mn) for v in x.logical()]
    return ret,got,exp

def case_pool():
    op=random.choice([7,8]); lay=random.choice([NCHW,NHWC]); dt=random.choice([I8,U8,I16,I32])
    N,C,H,W=random.randint(1,2),random.randint(1,3),random.randint(1,7),random.randint(1,7)
    kh,kw=random.randint(1,3),random.randint(1,3); sh,sw=random.randint(1,3),random.randint(1,3)
    pt,pb=random.randint(0,kh-1),random.randint(0,kh-1); pl,pr=random.randint(0,kw-1),random.randint(0,kw-1)
    OH=(H+pt+pb-kh)//sh+1; OW=(W+pl+pr-kw)//sw+1
    if OH<1 or OW<1: return None
    cp=op==8 and random.random()<0.5
    x=T(0,dt,lay,act4(lay,N,C,H,W),random.random()<0.5); y=T(3,dt,lay,act4(lay,N,C,OH,OW),random.random()<0.5)
    lo,hi=RNG[dt]
    ret,got=run(op,4 if cp else 0,lo,hi,[kh,kw,sh,sw,pt,pl,pb,pr],[x,y])
    exp=[]
    for n in range(N):
        for c in range(C):
            for oh in range(OH):
                for ow in range(OW):
                    vals=[x.get(n,c,oh*sh-pt+i,ow*sw-pl+j) for i in range(kh) for j in range(kw)
                          if 0<=oh*sh-pt+i<H and 0<=ow*sw-pl+j<W]
                    if op==7: exp.append(max(vals) if vals else lo)
                    else:
                        s=sum(vals); cnt=kh*kw if cp else len(vals)
                        exp.append((2*s+cnt)//(2*cnt) if cnt else 0)
    return ret,got,exp

def case_requant():
    lay=random.choice([PLAIN,NCHW,NHWC]); xdt,ydt=random.choice([I8,U8,I16,I32]),random.choice([I8,U8,I16,I32])
    shape=[random.randint(1,4) for _ in range(4 if lay else random.randint(1,4))]
    axis=random.randint(0,len(shape)-1)
    x=T(0,xdt,lay,shape,random.random()<0.5); y=T(3,ydt,lay,shape,random.random()<0.5)
    L=shape[axis] if random.random()<0.6 else 1
    m=T(4,I32,PLAIN,[L]); s=T(5,I32,PLAIN,[L]); s.buf=[random.randint(-40,40) for _ in s.buf]
    izp=random.randint(-100,100); ozp=random.randint(-100,100); amin,amax=-(1<<31),(1<<31)-1
    lo,hi=rq_bounds(ydt,amin,amax)
    ret,got=run(9,0,lo,hi,[izp,axis,ozp,amin,amax,0],[x,y,m,s])
    # channel = index along submitted axis; map to logical
    if lay==NHWC: la=[0,2,3,1][axis]
    else: la=axis+4-len(shape)
    exp=[]
    for n in range(y.dim[0]):
        for c in range(y.dim[1]):
            for h in range(y.dim[2]):
                for w in range(y.dim[3]):
                    ch=[n,c,h,w][la]
                    i=0 if L==1 else ch
                    exp.append(requant(x.get(n,c,h,w)-izp,m.buf[i*m.eff[0]],s.buf[i*s.eff[0]],ozp,lo,hi))
    return ret,got,exp

def case_copy():
    dt=random.choice([I8,U8,I16,I32]); l1=random.choice([NCHW,NHWC]); l2=random.choice([NCHW,NHWC])
    N,C,H,W=[random.randint(1,4) for _ in range(4)]
    x=T(0,dt,l1,act4(l1,N,C,H,W),random.random()<0.5); y=T(3,dt,l2,act4(l2,N,C,H,W),random.random()<0.5)
    lo,hi=RNG[dt]
    ret,got=run(10,0,lo,hi,[],[x,y])
    return ret,got,x.logical()

def case_lut():
    lay=random.choice([PLAIN,NCHW,NHWC]); xdt,ydt=random.choice([I8,U8]),random.choice([I8,U8])
    shape=[random.randint(1,4) for _ in range(4 if lay else random.randint(1,4))]
    x=T(0,xdt,lay,shape,random.random()<0.5); y=T(3,ydt,lay,shape,random.random()<0.5)
    tab=T(1,ydt,PLAIN,[256],random.random()<0.5)
    lo,hi=RNG[ydt]
    ret,got=run(11,0,lo,hi,[],[x,tab,y])
    # out = table[x - dtype_min(x)]
    return ret,got,[tab.buf[(v-RNG[xdt][0])*tab.eff[0]] for v in x.logical()]

HARNESS=sys.argv[1]
random.seed(int(sys.argv[2]) if len(sys.argv)>2 else 1)
cases=[case_conv,case_gemm,case_elt,case_clip,case_pool,case_requant,case_copy,case_lut]
n=int(sys.argv[3]) if len(sys.argv)>3 else 400
bad=0; done={}
for i in range(n):
    f=random.choice(cases); r=f()
    if r is None: continue
    ret,got,exp=r
    name=f.__name__[5:]
    done[name]=done.get(name,0)+1
    if ret!=0 or got!=exp:
        bad+=1
        if bad<5: print("MISMATCH",name,"ret",ret,"got",got[:8],"want",exp[:8])
print("sim ops vs reference:",", ".join("%s %d"%kv for kv in sorted(done.items())),"- %d mismatching case(s)"%bad)
sys.exit(1 if bad else 0)
