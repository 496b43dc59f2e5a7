-- A session as typed at lt's prompt (one statement per line; each result is printed),
-- for scripts/bench/collector_speed.sh: build a small model, look at it, train it a little,
-- inspect gradients and memory on the way.
lt.manual_seed(1)
m = lt.nn.Sequential(lt.nn.Linear(784, 256), lt.nn.ReLU(), lt.nn.Linear(256, 10))
m
x = lt.randn(128, 784)
y = lt.randint(1, 10, {128})
opt = lt.optim.SGD(m:parameters(), {lr = 0.1, momentum = 0.9})
loss = lt.nn.functional.cross_entropy(m(x), y)
loss
loss:backward()
m[1].weight.grad:norm()
opt:step()
opt:zero_grad()
for i = 1, 50 do local l = lt.nn.functional.cross_entropy(m(x), y); l:backward(); opt:step(); opt:zero_grad() end
lt.nn.functional.cross_entropy(m(x), y):item()
lt.memory.allocated()
a = lt.randn(256, 256)
b = a:matmul(a:t())
b:sum():item()
b[1][1]:item()
c = (a * 2 + 1):relu():mean()
c
lt.memory.stats().num_peak_collections
for i = 1, 200 do local t = lt.randn(64, 64); t = t:matmul(t) end
lt.memory.allocated()
for i = 1, 50 do local l = lt.nn.functional.cross_entropy(m(x), y); l:backward(); opt:step(); opt:zero_grad() end
lt.nn.functional.cross_entropy(m(x), y):item()
