-- What a team would otherwise build in Redis: resolve-or-create over claim keys.
-- KEYS[1] = claim:<vendor>:k:<keychain>, KEYS[2] = claim:<vendor>:i:<idfv>
-- ARGV[1] = bundle, ARGV[2] = a timestamp
-- The keychain claim wins over the IDFV claim; a new device claims both. A script runs
-- atomically, so concurrent first installs of one device get one ID.
local device = redis.call('GET', KEYS[1])
if not device then device = redis.call('GET', KEYS[2]) end
local created = 0
if not device then
    device = tostring(redis.call('INCR', 'device:next'))
    created = 1
end
redis.call('SET', KEYS[1], device, 'NX')
redis.call('SET', KEYS[2], device, 'NX')
redis.call('HSETNX', 'apps:' .. device, ARGV[1], ARGV[2])
return {device, created}
