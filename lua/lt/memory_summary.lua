-- lt.memory.summary(dev): a readable table of allocator statistics, laid out
-- like torch.cuda.memory_summary.
return function(memory)
  local function human(bytes)
    local units = { "B", "KiB", "MiB", "GiB", "TiB" }
    local value, unit = bytes, 1
    while math.abs(value) >= 1024 and unit < #units do
      value, unit = value / 1024, unit + 1
    end
    if unit == 1 then return string.format("%d %s", value, units[1]) end
    return string.format("%.1f %s", value, units[unit])
  end

  local function count(n) return tostring(n) end

  local rule = string.rep("=", 85)
  local thin = string.rep("-", 85)
  local function row(label, a, b, c, d)
    return string.format("| %-26s| %11s | %11s | %11s | %11s |", label, a, b, c, d)
  end

  local sections = {
    { "allocated_bytes", "Allocated memory", human },
    { "active_bytes", "Active memory", human },
    { "requested_bytes", "Requested memory", human },
    { "reserved_bytes", "Reserved memory", human },
    { "inactive_split_bytes", "Non-releasable memory", human },
    { "allocation", "Allocations", count },
    { "active", "Active allocs", count },
    { "segment", "Reserved segments", count },
    { "inactive_split", "Non-releasable allocs", count },
  }
  local pools = { { "all", "" }, { "large_pool", "  from large pool" }, { "small_pool", "  from small pool" } }

  -- What memory.stats(nil) reports: `lt --device`'s device, else the CPU.
  local function default_device()
    local g = rawget(_G, "lt")
    return type(g) == "table" and rawget(g, "default_device") or "cpu"
  end

  return function(dev)
    local s = memory.stats(dev)
    local lines = {
      rule,
      string.format("| %-81s |", "lt memory summary, device " .. (dev or default_device())),
      thin,
      string.format("| %-81s |", string.format("out-of-memory errors: %d | alloc retries: %d | collections: %d",
        s.num_ooms, s.num_alloc_retries, s.num_collections)),
      string.format("| %-81s |", string.format("limit: %s | segment fallbacks: %d",
        s.limit > 0 and human(s.limit) or "none", s.num_segment_fallbacks)),
      rule,
      row("Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"),
    }
    for _, section in ipairs(sections) do
      local key, title, fmt = section[1], section[2], section[3]
      lines[#lines + 1] = thin
      for _, pool in ipairs(pools) do
        local st = s[key][pool[1]]
        local label = pool[2] == "" and title or pool[2]
        lines[#lines + 1] = row(label, fmt(st.current), fmt(st.peak), fmt(st.allocated), fmt(st.freed))
      end
    end
    lines[#lines + 1] = rule
    lines[#lines + 1] = row("Allocated by category", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed")
    lines[#lines + 1] = thin
    for _, cat in ipairs { "parameter", "gradient", "optimizer", "activation", "other", "workspace" } do
      local st = s.by_category[cat]
      if st then
        lines[#lines + 1] = row(cat, human(st.current), human(st.peak), human(st.allocated), human(st.freed))
      end
    end
    lines[#lines + 1] = rule
    return table.concat(lines, "\n")
  end
end
