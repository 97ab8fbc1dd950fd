-- Library (pulled into scripts by `--@include selector`): evaluates the JSON form of a
-- durables selector (see durables/selector.py) against an event's key and properties,
-- with JMS three-valued logic: nil is unknown, and only true matches. Must agree with
-- the Python evaluator; tests/test_selector_lua.py checks the two side by side.
-- No globals needed; defines the table `selector` (matches, fields), the rest is local.
-- The evaluator's functions are built at the first `matches`: defining them costs the
-- server about 3 µs at every call of a script that includes this, and most calls of
-- those scripts (fetches of durables without filters) never evaluate one.
local selector = {}

local function build_evaluator()
  local function kind_of(v)
    local t = type(v)
    if t == 'string' then return 'str' end
    if t == 'number' then return 'num' end
    if t == 'boolean' then return 'bool' end
    return nil
  end

  local function chars(s)
    local out = {}
    for ch in string.gmatch(s, '[%z\1-\127\194-\244][\128-\191]*') do
      out[#out + 1] = ch
    end
    return out
  end

  -- LIKE pattern as atoms: true for %, false for _, else the one character to match.
  local function like_atoms(pattern, escape)
    local atoms, pending_escape = {}, false
    for _, ch in ipairs(chars(pattern)) do
      if pending_escape then
        atoms[#atoms + 1] = ch
        pending_escape = false
      elseif ch == escape then
        pending_escape = true
      elseif ch == '%' then
        atoms[#atoms + 1] = true
      elseif ch == '_' then
        atoms[#atoms + 1] = false
      else
        atoms[#atoms + 1] = ch
      end
    end
    return atoms
  end

  -- Wildcard matching with one backtrack point: O(len(value) * len(pattern)), never exponential.
  local function like(value, atoms)
    local v = chars(value)
    local i, j, star, mark = 1, 1, 0, 0
    while i <= #v do
      local a = atoms[j]
      if j <= #atoms and a ~= true and (a == false or a == v[i]) then
        i, j = i + 1, j + 1
      elseif j <= #atoms and a == true then
        star, mark, j = j, i, j + 1
      elseif star > 0 then
        j, mark = star + 1, mark + 1
        i = mark
      else
        return false
      end
    end
    while j <= #atoms and atoms[j] == true do
      j = j + 1
    end
    return j > #atoms
  end

  local ORDER = {
    ['<'] = function(a, b) return a < b end,
    ['<='] = function(a, b) return a <= b end,
    ['>'] = function(a, b) return a > b end,
    ['>='] = function(a, b) return a >= b end,
  }

  local eval

  local function compare(node, key, props)
    local a = eval(node[3], key, props)
    local kind = kind_of(a)
    if kind == nil then return nil end
    local b = eval(node[4], key, props)
    if kind_of(b) ~= kind then return nil end
    local op = node[2]
    if op == '=' then return a == b end
    if op == '<>' then return a ~= b end
    if kind ~= 'num' then return nil end
    return ORDER[op](a, b)
  end

  local function arith(node, key, props)
    local a = eval(node[3], key, props)
    local b = eval(node[4], key, props)
    if type(a) ~= 'number' or type(b) ~= 'number' then return nil end
    local op = node[2]
    if op == '+' then return a + b end
    if op == '-' then return a - b end
    if op == '*' then return a * b end
    if b == 0 then return nil end
    return a / b
  end

  local function member(node, key, props)
    local v = eval(node[2], key, props)
    local kind = kind_of(v)
    if kind ~= 'str' and kind ~= 'num' then return nil end
    local mixed = false
    for _, item in ipairs(node[3]) do
      if item == v then return true end
      if kind_of(item) ~= kind then mixed = true end
    end
    if mixed then return nil end
    return false
  end

  local function junction(node, key, props, stop)
    local result = not stop
    for i = 2, #node do
      local v = eval(node[i], key, props)
      if v == stop then return stop end
      if v == nil then result = nil end
    end
    return result
  end

  eval = function(node, key, props)
    local op = node[1]
    if op == 'lit' then
      if node[2] == cjson.null then return nil end
      return node[2]
    elseif op == 'prop' then
      local v = props[node[2]]
      if v == cjson.null then return nil end
      return v
    elseif op == 'key' then
      return key
    elseif op == 'and' then
      return junction(node, key, props, false)
    elseif op == 'or' then
      return junction(node, key, props, true)
    elseif op == 'not' then
      local v = eval(node[2], key, props)
      if v == nil then return nil end
      return not v
    elseif op == 'cmp' then
      return compare(node, key, props)
    elseif op == 'arith' then
      return arith(node, key, props)
    elseif op == 'in' then
      return member(node, key, props)
    elseif op == 'like' then
      local v = eval(node[2], key, props)
      if type(v) ~= 'string' then return nil end
      if node.atoms == nil then
        local escape = node[4]
        if escape == cjson.null then escape = nil end
        node.atoms = like_atoms(node[3], escape)
      end
      return like(v, node.atoms)
    elseif op == 'is_null' then
      return eval(node[2], key, props) == nil
    end
    return nil
  end

  selector.matches = function(tree, key, props_json)
    local props = {}
    if props_json and props_json ~= '' then
      props = cjson.decode(props_json)
    end
    return eval(tree, key, props) == true
  end
end

-- True when the event (key or nil, properties JSON or nil) matches the selector tree.
function selector.matches(tree, key, props_json)
  build_evaluator()  -- replaces selector.matches
  return selector.matches(tree, key, props_json)
end

-- The fields of a raw stream entry's field list: key (or nil) and properties JSON (or nil).
function selector.fields(list)
  local key, props = nil, nil
  for i = 1, #list, 2 do
    if list[i] == 'k' then
      key = list[i + 1]
    elseif list[i] == 'p' then
      props = list[i + 1]
    end
  end
  return key, props
end
