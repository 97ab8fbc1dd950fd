-- Library (`--@include fields`): a stream entry's fields as the server returns them, a
-- flat list field, value, ...

-- The value of field `name`, or nil.
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then
      return fields[i + 1]
    end
  end
  return nil
end
