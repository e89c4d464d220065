//! Stateless operators fused into the worker's loop: a chain of them is one
//! concrete type (static dispatch, inlined), applied to each record with the
//! consumer of its outputs given at the call.

use std::marker::PhantomData;

/// A chain of fused stateless operators from `In` to `Self::Out`.
pub trait Pipe<In>: 'static {
    /// Output record type.
    type Out;
    /// Pushes `x` through the chain, calling `emit` for every output.
    fn run<E: FnMut(Self::Out)>(&mut self, x: In, emit: &mut E);
}

/// The empty chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity;

impl<T> Pipe<T> for Identity {
    type Out = T;
    #[inline(always)]
    fn run<E: FnMut(T)>(&mut self, x: T, emit: &mut E) {
        emit(x)
    }
}

/// `map`: one output per input.
pub struct Map<P, F, O>(
    pub(crate) P,
    pub(crate) F,
    pub(crate) PhantomData<fn() -> O>,
);

impl<In, P: Pipe<In>, F: FnMut(P::Out) -> O + 'static, O: 'static> Pipe<In> for Map<P, F, O> {
    type Out = O;
    #[inline(always)]
    fn run<E: FnMut(O)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| emit(f(y)))
    }
}

/// `filter`: keeps inputs for which the predicate holds.
pub struct Filter<P, F>(pub(crate) P, pub(crate) F);

impl<In, P: Pipe<In>, F: FnMut(&P::Out) -> bool + 'static> Pipe<In> for Filter<P, F> {
    type Out = P::Out;
    #[inline(always)]
    fn run<E: FnMut(P::Out)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| {
            if f(&y) {
                emit(y)
            }
        })
    }
}

/// `flat_map`: zero or more outputs per input.
pub struct FlatMap<P, F, I>(
    pub(crate) P,
    pub(crate) F,
    pub(crate) PhantomData<fn() -> I>,
);

impl<In, P: Pipe<In>, F: FnMut(P::Out) -> I + 'static, I: IntoIterator + 'static> Pipe<In>
    for FlatMap<P, F, I>
{
    type Out = I::Item;
    #[inline(always)]
    fn run<E: FnMut(I::Item)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| {
            for z in f(y) {
                emit(z)
            }
        })
    }
}

/// `inspect`: sees every record by reference, passes it on.
pub struct Inspect<P, F>(pub(crate) P, pub(crate) F);

impl<In, P: Pipe<In>, F: FnMut(&P::Out) + 'static> Pipe<In> for Inspect<P, F> {
    type Out = P::Out;
    #[inline(always)]
    fn run<E: FnMut(P::Out)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| {
            f(&y);
            emit(y)
        })
    }
}

/// Two chains fused one after the other.
pub struct Then<P, Q>(pub(crate) P, pub(crate) Q);

impl<In, P: Pipe<In>, Q: Pipe<P::Out>> Pipe<In> for Then<P, Q> {
    type Out = Q::Out;
    #[inline(always)]
    fn run<E: FnMut(Q::Out)>(&mut self, x: In, emit: &mut E) {
        let q = &mut self.1;
        self.0.run(x, &mut |y| q.run(y, emit))
    }
}
