//! Sprig's math and number conversion functions. Integer functions convert their arguments
//! with `cast.ToInt64` (a float64 is truncated); the `f` functions compute in decimal as
//! Sprig's `shopspring/decimal` does (`addf 0.1 0.2` is 0.3).

use serde_json::Value;

use super::{float, i, int, s, to_f64, to_i64};
use crate::gotemplate::{Func, Funcs, P};

/// A float64 result rounded to the 15 significant digits decimal arithmetic keeps exact.
fn decimal(f: f64) -> Value {
    if !f.is_finite() || f == 0.0 {
        return float(f);
    }
    let rounded: f64 = format!("{f:.14e}").parse().unwrap_or(f);
    float(rounded)
}

const DIV_ZERO: &str = "runtime error: integer divide by zero";

pub(super) fn add(f: &mut Funcs) {
    use P::{Any, Float, Int, Str};
    f.insert("add1", Func::pure(&[Any], |a| Ok(int(to_i64(a[0]).wrapping_add(1)))));
    f.insert("add", Func::pure_variadic(&[], Any, |a| Ok(int(a.iter().map(|v| to_i64(v)).fold(0i64, i64::wrapping_add)))));
    f.insert("sub", Func::pure(&[Any, Any], |a| Ok(int(to_i64(a[0]).wrapping_sub(to_i64(a[1]))))));
    f.insert("mul", Func::pure_variadic(&[Any], Any, |a| Ok(int(a.iter().map(|v| to_i64(v)).fold(1i64, i64::wrapping_mul)))));
    f.insert("div", Func::pure(&[Any, Any], |a| {
        let d = to_i64(a[1]);
        if d == 0 {
            return Err(DIV_ZERO.into());
        }
        Ok(int(to_i64(a[0]).wrapping_div(d)))
    }));
    f.insert("mod", Func::pure(&[Any, Any], |a| {
        let d = to_i64(a[1]);
        if d == 0 {
            return Err(DIV_ZERO.into());
        }
        Ok(int(to_i64(a[0]).wrapping_rem(d)))
    }));
    for name in ["max", "biggest"] {
        f.insert(name, Func::pure_variadic(&[Any], Any, |a| Ok(int(a.iter().map(|v| to_i64(v)).max().unwrap_or(0)))));
    }
    f.insert("min", Func::pure_variadic(&[Any], Any, |a| Ok(int(a.iter().map(|v| to_i64(v)).min().unwrap_or(0)))));
    f.insert("randInt", Func::pure(&[Int, Int], |a| {
        use rand::Rng;
        let (lo, hi) = (i(a[0]), i(a[1]));
        if hi <= lo {
            return Err("invalid argument to Intn".into());
        }
        Ok(int(rand::rng().random_range(lo..hi)))
    }));
    f.insert("add1f", Func::pure(&[Any], |a| Ok(decimal(to_f64(a[0]) + 1.0))));
    f.insert("addf", Func::pure_variadic(&[], Any, |a| Ok(decimal(a.iter().map(|v| to_f64(v)).sum()))));
    f.insert("subf", Func::pure_variadic(&[Any], Any, |a| {
        Ok(decimal(a[1..].iter().fold(to_f64(a[0]), |acc, v| acc - to_f64(v))))
    }));
    f.insert("mulf", Func::pure_variadic(&[Any], Any, |a| {
        Ok(decimal(a[1..].iter().fold(to_f64(a[0]), |acc, v| acc * to_f64(v))))
    }));
    f.insert("divf", Func::pure_variadic(&[Any], Any, |a| {
        let mut acc = to_f64(a[0]);
        for v in &a[1..] {
            let d = to_f64(v);
            if d == 0.0 {
                return Err("decimal division by 0".into());
            }
            acc /= d;
        }
        Ok(decimal(acc))
    }));
    f.insert("maxf", Func::pure_variadic(&[Any], Any, |a| Ok(float(a.iter().map(|v| to_f64(v)).fold(f64::NEG_INFINITY, f64::max)))));
    f.insert("minf", Func::pure_variadic(&[Any], Any, |a| Ok(float(a.iter().map(|v| to_f64(v)).fold(f64::INFINITY, f64::min)))));
    f.insert("ceil", Func::pure(&[Any], |a| Ok(float(to_f64(a[0]).ceil()))));
    f.insert("floor", Func::pure(&[Any], |a| Ok(float(to_f64(a[0]).floor()))));
    f.insert("round", Func::pure_variadic(&[Any, Int], Float, |a| {
        let x = to_f64(a[0]);
        let places = i(a[1]);
        let half = a.get(2).and_then(|v| v.as_f64()).unwrap_or(0.5);
        let pow = 10f64.powi(places as i32);
        let digit = pow * x;
        let (int_part, frac) = (digit.trunc(), digit.fract());
        let r = if frac >= half { int_part + 1.0 } else { int_part };
        Ok(float(r / pow))
    }));
    f.insert("int", Func::pure(&[Any], |a| Ok(int(to_i64(a[0])))));
    f.insert("int64", Func::pure(&[Any], |a| Ok(int(to_i64(a[0])))));
    f.insert("float64", Func::pure(&[Any], |a| Ok(float(to_f64(a[0])))));
    f.insert("atoi", Func::pure(&[Str], |a| Ok(int(s(a[0]).parse::<i64>().unwrap_or(0)))));
    f.insert("toDecimal", Func::pure(&[Any], |a| {
        let text = super::strval(a[0]);
        Ok(int(i64::from_str_radix(&text, 8).unwrap_or(0)))
    }));
}
