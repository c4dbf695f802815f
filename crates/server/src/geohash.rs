//! Redis's geo arithmetic: the 52-bit interleaved geohash that scores a geo
//! member, the haversine distance, and the choice of the nine geohash
//! boxes a radius or box search scans. Results must match Redis to the
//! digits its tests check, so every step follows Redis's own sequence of
//! floating point operations (same ranges, same rounding, same order).

/// Bits per coordinate: 26, for a 52-bit score a double holds exactly.
pub const STEP_MAX: u8 = 26;
pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
/// The Web Mercator limits, Redis's latitude range.
pub const LAT_MIN: f64 = -85.051_128_78;
pub const LAT_MAX: f64 = 85.051_128_78;
pub const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    const ZERO: Hash = Hash { bits: 0, step: 0 };

    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The scores `min..max` (max excluded) of the 52-bit hashes inside
    /// this box.
    pub fn score_range(self) -> (u64, u64) {
        let shift = 52 - u32::from(self.step) * 2;
        (self.bits << shift, (self.bits + 1) << shift)
    }
}

#[derive(Clone, Copy)]
struct Range {
    min: f64,
    max: f64,
}

const LON: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
const LAT: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

#[derive(Clone, Copy, Debug)]
pub struct Area {
    pub lon: (f64, f64),
    pub lat: (f64, f64),
}

fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
    x = (x | x << 8) & 0x00FF_00FF_00FF_00FF;
    x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | x << 2) & 0x3333_3333_3333_3333;
    (x | x << 1) & 0x5555_5555_5555_5555
}

fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | x >> 1) & 0x3333_3333_3333_3333;
    x = (x | x >> 2) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | x >> 4) & 0x00FF_00FF_00FF_00FF;
    x = (x | x >> 8) & 0x0000_FFFF_0000_FFFF;
    ((x | x >> 16) & 0x0000_0000_FFFF_FFFF) as u32
}

/// Latitude bits at even positions, longitude at odd ones.
fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | spread(lon) << 1
}

/// Whether Redis accepts this pair as a position.
pub fn valid(lon: f64, lat: f64) -> bool {
    (LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

fn encode_in(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if !valid(lon, lat) || lat < lat_r.min || lat > lat_r.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min) * scale;
    Some(Hash {
        bits: interleave(lat_off as u32, lon_off as u32),
        step,
    })
}

pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in(LON, LAT, lon, lat, step)
}

/// The 52-bit score of a position.
pub fn score(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX).map(|h| h.score_range().0)
}

fn decode_area(h: Hash) -> Option<Area> {
    if h.is_zero() {
        return None;
    }
    let lat_i = squash(h.bits);
    let lon_i = squash(h.bits >> 1);
    let div = (1u64 << h.step) as f64;
    let at = |r: Range, i: u32| {
        let scale = r.max - r.min;
        (
            r.min + (f64::from(i) / div) * scale,
            r.min + (f64::from(i.wrapping_add(1)) / div) * scale,
        )
    };
    Some(Area {
        lon: at(LON, lon_i),
        lat: at(LAT, lat_i),
    })
}

/// A score's bits as Redis reads them: its C cast `(uint64_t)score`, as
/// x86-64 compilers do it. A negative score wraps through a signed
/// conversion (-5 is 2^64-5) and one of 2^64 or more comes out as 0, so a
/// sorted set that was never a GEO set decodes as Redis decodes it.
fn score_bits(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if score < TWO_63 {
        // Rust saturates below -2^63 at i64::MIN, x86's "integer
        // indefinite" value.
        score as i64 as u64
    } else if score < 2.0 * TWO_63 {
        (score - TWO_63) as u64 | (1 << 63)
    } else {
        0
    }
}

/// The position a score stands for: the centre of its cell.
pub fn decode_score(score: f64) -> Option<(f64, f64)> {
    let a = decode_area(Hash {
        bits: score_bits(score),
        step: STEP_MAX,
    })?;
    let lon = ((a.lon.0 + a.lon.1) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((a.lat.0 + a.lat.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    Some((lon, lat))
}

/// The standard 11-character base32 geohash (latitude range ±90) of the
/// position a score stands for, as GEOHASH reports it.
pub fn standard_string(score: f64) -> Option<String> {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score)?;
    let h = encode_in(
        LON,
        Range {
            min: -90.0,
            max: 90.0,
        },
        lon,
        lat,
        STEP_MAX,
    )?;
    // 52 bits make ten characters; the eleventh is padding.
    Some(
        (0..11)
            .map(|i| {
                let idx = if i == 10 {
                    0
                } else {
                    (h.bits >> (52 - (i + 1) * 5)) & 0x1f
                };
                char::from(ALPHABET[idx as usize])
            })
            .collect(),
    )
}

fn deg_rad(d: f64) -> f64 {
    d * D_R
}

fn rad_deg(r: f64) -> f64 {
    r / D_R
}

pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in meters.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((deg_rad(lon2) - deg_rad(lon1)) / 2.0).sin();
    // Same meridian: the cheaper formula, as Redis takes it here.
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// What a search covers, in meters.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// The search centre and shape.
#[derive(Clone, Copy, Debug)]
pub struct Search {
    pub lon: f64,
    pub lat: f64,
    pub shape: Shape,
}

impl Search {
    /// The distance to (lon, lat) if that point is inside the shape.
    pub fn distance_if_within(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= r).then_some(d)
            }
            Shape::Box { width, height } => {
                if lat_distance(lat, self.lat) > height / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }

    /// (min lon, min lat, max lon, max lat) around the shape.
    fn bounds(&self) -> [f64; 4] {
        let (h, w) = match self.shape {
            Shape::Radius(r) => (r, r),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let lat_delta = rad_deg(h / EARTH_RADIUS_M);
        let lon_top = rad_deg(w / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let lon_bottom = rad_deg(w / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        // The widest parallel is the one nearer the equator.
        let lon_delta = if self.lat < 0.0 { lon_bottom } else { lon_top };
        [
            self.lon - lon_delta,
            self.lat - lat_delta,
            self.lon + lon_delta,
            self.lat + lat_delta,
        ]
    }

    /// The geohash boxes to scan, in Redis's order (centre, N, S, E, W,
    /// NE, NW, SE, SW), without the ones that cannot hold a match and
    /// without a box equal to the one scanned just before it.
    pub fn boxes(&self) -> Vec<Hash> {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let radius = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        let mut step = estimate_steps(radius, self.lat);
        let (mut hash, mut nb, mut area) = self.cell(step);
        let edge = |h: Hash| {
            decode_area(h).unwrap_or(Area {
                lon: (0.0, 0.0),
                lat: (0.0, 0.0),
            })
        };
        let too_coarse = edge(nb.north).lat.1 < max_lat
            || edge(nb.south).lat.0 > min_lat
            || edge(nb.east).lon.1 < max_lon
            || edge(nb.west).lon.0 > min_lon;
        if step > 1 && too_coarse {
            step -= 1;
            (hash, nb, area) = self.cell(step);
        }
        if step >= 2 {
            if area.lat.0 < min_lat {
                nb.south = Hash::ZERO;
                nb.south_west = Hash::ZERO;
                nb.south_east = Hash::ZERO;
            }
            if area.lat.1 > max_lat {
                nb.north = Hash::ZERO;
                nb.north_east = Hash::ZERO;
                nb.north_west = Hash::ZERO;
            }
            if area.lon.0 < min_lon {
                nb.west = Hash::ZERO;
                nb.south_west = Hash::ZERO;
                nb.north_west = Hash::ZERO;
            }
            if area.lon.1 > max_lon {
                nb.east = Hash::ZERO;
                nb.south_east = Hash::ZERO;
                nb.north_east = Hash::ZERO;
            }
        }
        let all = [
            hash,
            nb.north,
            nb.south,
            nb.east,
            nb.west,
            nb.north_east,
            nb.north_west,
            nb.south_east,
            nb.south_west,
        ];
        let mut out: Vec<Hash> = Vec::with_capacity(9);
        let mut last: Option<(usize, Hash)> = None;
        for (i, h) in all.into_iter().enumerate() {
            if h.is_zero() {
                continue;
            }
            // Huge radii make neighbours coincide. Redis skips a box equal
            // to the last one it scanned, unless that one was the centre.
            if last.is_some_and(|(li, lh)| li > 0 && lh == h) {
                continue;
            }
            out.push(h);
            last = Some((i, h));
        }
        out
    }

    fn cell(&self, step: u8) -> (Hash, Neighbors, Area) {
        let hash = encode(self.lon, self.lat, step).unwrap_or(Hash::ZERO);
        let nb = neighbors(hash);
        let area = decode_area(hash).unwrap_or(Area {
            lon: (0.0, 0.0),
            lat: (0.0, 0.0),
        });
        (hash, nb, area)
    }
}

fn estimate_steps(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return STEP_MAX;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

struct Neighbors {
    north: Hash,
    south: Hash,
    east: Hash,
    west: Hash,
    north_east: Hash,
    north_west: Hash,
    south_east: Hash,
    south_west: Hash,
}

const ODD: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const EVEN: u64 = 0x5555_5555_5555_5555;

/// Moves a box one cell along one axis (`lon_axis`: east/west), wrapping.
fn moved(h: Hash, d: i8, lon_axis: bool) -> Hash {
    if d == 0 {
        return h;
    }
    let (mine, other) = if lon_axis { (ODD, EVEN) } else { (EVEN, ODD) };
    let shift = 64 - u32::from(h.step) * 2;
    let mut v = h.bits & mine;
    let keep = h.bits & other;
    let zz = other.checked_shr(shift).unwrap_or(0);
    if d > 0 {
        v = v.wrapping_add(zz.wrapping_add(1));
    } else {
        v |= zz;
        v = v.wrapping_sub(zz.wrapping_add(1));
    }
    v &= mine.checked_shr(shift).unwrap_or(0);
    Hash {
        bits: v | keep,
        step: h.step,
    }
}

fn at(h: Hash, dx: i8, dy: i8) -> Hash {
    moved(moved(h, dx, true), dy, false)
}

fn neighbors(h: Hash) -> Neighbors {
    Neighbors {
        north: at(h, 0, 1),
        south: at(h, 0, -1),
        east: at(h, 1, 0),
        west: at(h, -1, 0),
        north_east: at(h, 1, 1),
        north_west: at(h, -1, 1),
        south_east: at(h, 1, -1),
        south_west: at(h, -1, -1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palermo_and_catania_match_redis() {
        // GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        let p = score(13.361389, 38.115556).unwrap();
        let c = score(15.087269, 37.502669).unwrap();
        assert_eq!(p, 3479099956230698);
        assert_eq!(c, 3479447370796909);
        let (plon, plat) = decode_score(p as f64).unwrap();
        assert_eq!(format!("{plon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{plat:.17}"), "38.11555639549629859");
        let (clon, clat) = decode_score(c as f64).unwrap();
        let d = distance(plon, plat, clon, clat);
        assert_eq!(format!("{d:.4}"), "166274.1516");
        assert_eq!(standard_string(p as f64).unwrap(), "sqc8b49rny0");
        assert_eq!(standard_string(c as f64).unwrap(), "sqdtr74hyu0");
    }
}
