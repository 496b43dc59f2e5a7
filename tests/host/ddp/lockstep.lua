-- What the DDP checks share (tests/host/ddp/check.lua, tests/host/distributed/ddp_cuda.lua):
-- a distributed model and one process's reference trained side by side, each step
-- the rank's shard (x, y) through the wrapped model and the full batch (X, Y) through the
-- reference, so that their parameters can be compared after.
local F = require("lt").nn.functional

return function(steps, dist, ref)
  for _ = 1, steps do
    dist.opt:zero_grad()
    F.cross_entropy(dist.model(dist.x), dist.y):backward()
    dist.opt:step()
    ref.opt:zero_grad()
    F.cross_entropy(ref.model(ref.x), ref.y):backward()
    ref.opt:step()
  end
end
