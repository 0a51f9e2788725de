"""The course's software models (SIMULATED mode): the copy-cost model t(n) = t0 + n/B, the toy GPU,
TTM, the buddy allocator and the route model."""
