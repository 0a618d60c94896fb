-- What a team would otherwise build: devices, claims and app sightings in PostgreSQL, and one
-- plpgsql function that resolves or creates the device for a registration.
CREATE TABLE devices (
    id         uuid PRIMARY KEY,
    vendor     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per (vendor, identifier); kind 1 is the keychain UUID, 2 the IDFV.
CREATE TABLE claims (
    vendor    text     NOT NULL,
    kind      smallint NOT NULL,
    value     uuid     NOT NULL,
    device_id uuid     NOT NULL REFERENCES devices (id),
    PRIMARY KEY (vendor, kind, value)
);

CREATE TABLE apps (
    device_id  uuid        NOT NULL REFERENCES devices (id),
    bundle     text        NOT NULL,
    first_seen timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL,
    PRIMARY KEY (device_id, bundle)
);

-- Resolve-or-create: the keychain claim wins over the IDFV claim; a new device claims both.
-- Two concurrent first installs race on the claim insert; ON CONFLICT keeps the first, and the
-- loser re-reads the winner's device (its own device row stays behind unclaimed).
CREATE FUNCTION register(p_bundle text, p_idfv uuid, p_keychain uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v      text := split_part(p_bundle, '.', 1) || '.' || split_part(p_bundle, '.', 2);
    device uuid;
BEGIN
    SELECT c.device_id INTO device FROM claims c
     WHERE c.vendor = v AND ((c.kind = 1 AND c.value = p_keychain) OR (c.kind = 2 AND c.value = p_idfv))
     ORDER BY c.kind LIMIT 1;
    IF device IS NULL THEN
        device := gen_random_uuid();
        INSERT INTO devices (id, vendor) VALUES (device, v);
    END IF;
    INSERT INTO claims VALUES (v, 1, p_keychain, device), (v, 2, p_idfv, device) ON CONFLICT DO NOTHING;
    SELECT c.device_id INTO device FROM claims c WHERE c.vendor = v AND c.kind = 1 AND c.value = p_keychain;
    INSERT INTO apps VALUES (device, p_bundle, now(), now())
        ON CONFLICT (device_id, bundle) DO UPDATE SET last_seen = excluded.last_seen;
    RETURN device;
END;
$$;
