//! Which partition of a `file_id`-range-partitioned `event` table a file's rows belong to, from
//! the bounds PostgreSQL keeps in its relation cache (`PartitionBoundInfo`), so that the direct
//! insert path writes into the right leaf as `INSERT` routing would.
//!
//! PostgreSQL stores a range-partitioned table's bounds as one sorted list of points (an upper
//! bound and the next partition's lower bound are one point) and, for each gap between points,
//! the partition that covers it: `indexes[i + 1]` covers `[datums[i], datums[i + 1])`,
//! `indexes[0]` everything below `datums[0]`, and `-1` marks a gap (the default partition's, if
//! there is one). A value goes to `indexes[j + 1]`, `j` being the last point `<=` the value.

/// One bound point of a single-column range partitioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RangePoint {
    MinValue,
    Value(i64),
    MaxValue,
}

/// A range-partitioned table's bounds, as its relation cache holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeBounds {
    /// Sorted bound points.
    pub points: Vec<RangePoint>,
    /// `points.len() + 1` partition indexes (`-1`: no partition covers that span).
    pub indexes: Vec<i32>,
    /// The default partition's index, `-1` when there is none.
    pub default_index: i32,
}

impl RangeBounds {
    /// The index (into the partition descriptor's `oids`) of the partition `file_id` goes to,
    /// or `None` when no partition takes it (an `INSERT` would fail).
    pub fn partition_of(&self, file_id: i64) -> Option<usize> {
        if self.indexes.len() != self.points.len() + 1 {
            return None;
        }
        self.range_partition_of(file_id).or_else(|| usize::try_from(self.default_index).ok())
    }

    /// The range partition whose span holds `file_id`, the default partition aside.
    pub fn range_partition_of(&self, file_id: i64) -> Option<usize> {
        if self.indexes.len() != self.points.len() + 1 {
            return None;
        }
        let v = RangePoint::Value(file_id);
        // The number of points <= v is j + 1, where j is the last point <= v.
        let after = self.points.partition_point(|p| *p <= v);
        usize::try_from(self.indexes.get(after).copied().unwrap_or(-1)).ok()
    }

    /// The spans `[lower, upper)` that range partitions cover, in order, with the partition's
    /// index; spans bounded by `MINVALUE` or `MAXVALUE` are left out (retention drops closed
    /// spans of ids only).
    pub fn spans(&self) -> Vec<(i64, i64, usize)> {
        let mut out = Vec::new();
        for (i, pair) in self.points.windows(2).enumerate() {
            if let ([RangePoint::Value(lo), RangePoint::Value(hi)], Some(&index)) = (pair, self.indexes.get(i + 1)) {
                if let Ok(index) = usize::try_from(index) {
                    out.push((*lo, *hi, index));
                }
            }
        }
        out
    }

    /// Where the next range partition for the uncovered `file_id` goes: the span of
    /// `width` ids that holds it, cut to the gap between the partitions around it (so that a
    /// changed width, or pg_partman's spans, never make an overlap or leave a hole). `None` when
    /// a range partition already covers it.
    pub fn gap_for(&self, file_id: i64, width: i64) -> Option<(i64, i64)> {
        if self.range_partition_of(file_id).is_some() {
            return None;
        }
        let v = RangePoint::Value(file_id);
        let below = self.points.iter().rev().find_map(|p| match p {
            RangePoint::Value(x) if *p <= v => Some(*x),
            _ => None,
        });
        let above = self.points.iter().find_map(|p| match p {
            RangePoint::Value(x) if *p > v => Some(*x),
            _ => None,
        });
        let lower = span_start(file_id, width).max(below.unwrap_or(i64::MIN));
        let upper = lower.saturating_add(width.max(1)).min(above.unwrap_or(i64::MAX));
        Some((lower, upper.max(file_id.saturating_add(1))))
    }

    /// The first id above `file_id` where what covers it ends: the next bound point (`None`:
    /// nothing ends above it).
    pub fn next_point_after(&self, file_id: i64) -> Option<i64> {
        let v = RangePoint::Value(file_id);
        self.points.iter().find_map(|p| match p {
            RangePoint::Value(x) if *p > v => Some(*x),
            _ => None,
        })
    }

    /// The first file id no range partition covers, counting up from the highest partitioned
    /// span (`None`: a partition reaches `MAXVALUE`, or there are no ranges).
    pub fn covered_below(&self) -> Option<i64> {
        let last = self.points.iter().rposition(|_| true)?;
        // The span above the last point has no partition (ranges are closed above).
        match self.points.get(last) {
            Some(RangePoint::Value(v)) if self.indexes.get(last + 1).copied().unwrap_or(-1) < 0 => Some(*v),
            _ => None,
        }
    }
}

/// The name PostgreSQL's `pg_partman` gives an id-range partition (`<parent>_p<lower bound>`);
/// the extension's own partitions use it too, so that either can take over from the other.
pub fn partition_name(parent: &str, lower: i64) -> String {
    format!("{parent}_p{lower}")
}

/// The lower bound of the span of `files_per_partition` file ids that holds `file_id`.
pub fn span_start(file_id: i64, files_per_partition: i64) -> i64 {
    if files_per_partition <= 0 {
        return file_id;
    }
    file_id.div_euclid(files_per_partition).saturating_mul(files_per_partition)
}

#[cfg(test)]
mod tests {
    use super::RangePoint::{MaxValue, MinValue, Value};
    use super::*;

    fn bounds(points: Vec<RangePoint>, indexes: Vec<i32>, default_index: i32) -> RangeBounds {
        RangeBounds { points, indexes, default_index }
    }

    #[test]
    fn contiguous_ranges_route_by_lower_bound_inclusive_upper_exclusive() {
        // [0,10) -> 1, [10,20) -> 0 (partition descriptor order is by OID, not by bound).
        let b = bounds(vec![Value(0), Value(10), Value(20)], vec![-1, 1, 0, -1], -1);
        assert_eq!(b.partition_of(0), Some(1));
        assert_eq!(b.partition_of(9), Some(1));
        assert_eq!(b.partition_of(10), Some(0));
        assert_eq!(b.partition_of(19), Some(0));
        assert_eq!(b.partition_of(20), None);
        assert_eq!(b.partition_of(-1), None);
        assert_eq!(b.covered_below(), Some(20));
    }

    #[test]
    fn gaps_and_values_outside_go_to_the_default_partition() {
        // [0,10) -> 0, gap [10,20), [20,30) -> 1, default 2.
        let b = bounds(vec![Value(0), Value(10), Value(20), Value(30)], vec![-1, 0, -1, 1, -1], 2);
        assert_eq!(b.partition_of(15), Some(2));
        assert_eq!(b.partition_of(25), Some(1));
        assert_eq!(b.partition_of(30), Some(2));
        assert_eq!(b.partition_of(i64::MIN), Some(2));
        assert_eq!(b.range_partition_of(15), None);
        assert_eq!(b.range_partition_of(25), Some(1));
    }

    #[test]
    fn minvalue_and_maxvalue_bounds_cover_everything() {
        let b = bounds(vec![MinValue, Value(100), MaxValue], vec![-1, 0, 1, -1], -1);
        assert_eq!(b.partition_of(i64::MIN), Some(0));
        assert_eq!(b.partition_of(99), Some(0));
        assert_eq!(b.partition_of(100), Some(1));
        assert_eq!(b.partition_of(i64::MAX), Some(1));
        assert_eq!(b.covered_below(), None);
    }

    #[test]
    fn malformed_bounds_route_nowhere_instead_of_panicking() {
        assert_eq!(bounds(vec![Value(0)], vec![0], -1).partition_of(5), None);
        assert_eq!(bounds(vec![], vec![], 3).partition_of(5), None);
        assert_eq!(bounds(vec![], vec![-1], 3).partition_of(5), Some(3));
        assert_eq!(bounds(vec![], vec![-1], -1).covered_below(), None);
    }

    #[test]
    fn spans_are_the_closed_ranges_in_order() {
        let b = bounds(vec![MinValue, Value(0), Value(10), Value(20), Value(30)], vec![-1, 3, 1, -1, 0, -1], 2);
        assert_eq!(b.spans(), vec![(0, 10, 1), (20, 30, 0)]);
    }

    #[test]
    fn a_gap_is_filled_to_the_width_without_overlapping_its_neighbours() {
        // [0,10) and [40,50) exist; the width is 15 now.
        let b = bounds(vec![Value(0), Value(10), Value(40), Value(50)], vec![-1, 0, -1, 1, -1], -1);
        assert_eq!(b.gap_for(5, 15), None);
        // 12's span of 15 starts at 0, cut to the partition below: [10, 25).
        assert_eq!(b.gap_for(12, 15), Some((10, 25)));
        // 31's starts at 30 and is cut to the partition above: [30, 40).
        assert_eq!(b.gap_for(31, 15), Some((30, 40)));
        assert_eq!(b.gap_for(55, 10), Some((50, 60)));
        assert_eq!(b.gap_for(-3, 10), Some((-10, 0)));
        assert_eq!(b.next_point_after(5), Some(10));
        assert_eq!(b.next_point_after(50), None);
        // No partition at all.
        let none = bounds(vec![], vec![-1], -1);
        assert_eq!(none.gap_for(123, 100), Some((100, 200)));
    }

    #[test]
    fn names_and_spans_follow_pg_partman() {
        assert_eq!(partition_name("event", 20000), "event_p20000");
        assert_eq!(span_start(0, 10_000), 0);
        assert_eq!(span_start(19_999, 10_000), 10_000);
        assert_eq!(span_start(20_000, 10_000), 20_000);
        assert_eq!(span_start(7, 0), 7);
    }
}
