-- interval_is_positive (src/pure/interval_rule.hpp): finite, and the least
-- length the interval can add to any moment above zero (at least zero with
-- or_zero): a month counts 28 days added and 31 subtracted, a day 24 hours,
-- less an hour when months and days move the date at all. numeric, so no
-- field's range overflows (the C++ rule computes in 128 bits). NULL for
-- NULL, so a CHECK passes "not set here". Self-contained: a CHECK runs it
-- as the role that writes the row, which may call nothing of idem's.
LANGUAGE plpgsql
AS $function$
DECLARE
    months numeric;
    calendar_days numeric;
    least_length numeric;
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    IF NOT pg_catalog.isfinite(value) THEN
        RETURN false;
    END IF;
    months := EXTRACT(YEAR FROM value) * 12 + EXTRACT(MONTH FROM value);
    calendar_days := EXTRACT(DAY FROM value) + months * CASE WHEN months >= 0 THEN 28 ELSE 31 END;
    least_length := calendar_days * 86400000000
                    + (EXTRACT(HOUR FROM value) * 3600 + EXTRACT(MINUTE FROM value) * 60) * 1000000
                    + EXTRACT(MICROSECONDS FROM value);
    IF calendar_days <> 0 THEN
        least_length := least_length - 3600000000;
    END IF;
    RETURN CASE WHEN coalesce(or_zero, false) THEN least_length >= 0 ELSE least_length > 0 END;
END
$function$
