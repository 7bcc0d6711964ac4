//! The UTC calendar: a Unix time in milliseconds as the date and time of
//! day people read, for the artifact's file name and the deadline a page
//! shows. Declared once here so that every place that names a time in UTC
//! names the same one. Pure arithmetic: no clock, no time zone, no locale.

/// A moment in UTC, to the second (the milliseconds are cut, never
/// rounded up: a deadline shown rounded up would name a moment after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// The proleptic Gregorian year (negative before year 0).
    pub year: i64,
    /// 1 to 12.
    pub month: i64,
    /// 1 to 31.
    pub day: i64,
    /// 0 to 23.
    pub hour: i64,
    /// 0 to 59.
    pub minute: i64,
    /// 0 to 59.
    pub second: i64,
}

impl UtcTime {
    /// The UTC date and time of `unix_ms` milliseconds since 1970-01-01.
    pub fn from_unix_ms(unix_ms: i64) -> UtcTime {
        let seconds = unix_ms.div_euclid(1000);
        let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
        let second_of_day = seconds.rem_euclid(86_400);
        UtcTime {
            year,
            month,
            day,
            hour: second_of_day / 3600,
            minute: second_of_day % 3600 / 60,
            second: second_of_day % 60,
        }
    }

    /// RFC 3339 in UTC, to the second: `2027-01-15T08:30:00Z`.
    pub fn rfc3339(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01, computed
/// in 400-year eras (146,097 days each) that start on March 1st, so the leap
/// day falls at the end of each shifted year.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::UtcTime;

    #[test]
    fn a_moment_is_cut_to_the_second_in_utc() {
        assert_eq!(
            UtcTime::from_unix_ms(1_800_001_800_999).rfc3339(),
            "2027-01-15T08:30:00Z"
        );
        assert_eq!(UtcTime::from_unix_ms(0).rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(UtcTime::from_unix_ms(-1).rfc3339(), "1969-12-31T23:59:59Z");
        assert_eq!(
            UtcTime::from_unix_ms(951_782_400_000).rfc3339(),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            UtcTime::from_unix_ms(4_107_542_400_000).rfc3339(),
            "2100-03-01T00:00:00Z"
        );
    }

    /// Against a reference model that walks the calendar a day at a time,
    /// from 1900 to 2400 (century and 400-year leap rules included).
    #[test]
    fn every_day_of_five_centuries_is_the_calendars() {
        let leap = |year: i64| (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let (mut year, mut month, mut day) = (1900_i64, 1_i64, 1_i64);
        let first = -25_567_i64; // 1900-01-01, in days before 1970-01-01
        for days in first..first + 182_621 {
            let expected = format!("{year:04}-{month:02}-{day:02}T23:59:59Z");
            assert_eq!(
                UtcTime::from_unix_ms(days * 86_400_000 + 86_399_999).rfc3339(),
                expected
            );
            let length = match month {
                2 if leap(year) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            day += 1;
            if day > length {
                (day, month) = (1, month + 1);
            }
            if month > 12 {
                (month, year) = (1, year + 1);
            }
        }
        assert_eq!((year, month, day), (2400, 1, 1));
    }
}
