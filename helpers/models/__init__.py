"""The course's software models (SIMULATED mode): the copy-cost model t(n) = t0 + n/B, the toy GPU,
TTM, the buddy allocator, the route model, and the radar pipeline that Chapter 9 and Lab 3 share
(`radar`: its capture card, processing, live consumer and discrete-event model)."""
