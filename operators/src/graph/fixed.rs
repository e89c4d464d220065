//! Floats with a fixed number of decimals, for the sinks'
//! `float_precision` ([`super::Csv::float_precision`],
//! [`super::JsonLines::float_precision`]): a serde serializer that passes
//! everything through to another one except `f32` and `f64`, which it
//! writes as text with `digits` decimals (Rust's `{:.digits$}`: rounded
//! to nearest, NaN and infinities as `NaN`, `inf`, `-inf`), and a
//! `serde_json` formatter that writes them as numbers the same way.

use serde::ser::{
    Serialize, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant, SerializeTuple,
    SerializeTupleStruct, SerializeTupleVariant, Serializer,
};
use std::io::Write;

/// `value`, serialized with its floats as text of `digits` decimals.
pub(crate) struct Fixed<'a, T: ?Sized> {
    pub(crate) value: &'a T,
    pub(crate) digits: usize,
}

impl<T: Serialize + ?Sized> Serialize for Fixed<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(FixedSer {
            inner: s,
            digits: self.digits,
        })
    }
}

/// The serializer behind [`Fixed`].
struct FixedSer<S> {
    inner: S,
    digits: usize,
}

/// A compound (sequence, tuple, map, struct) whose fields go through
/// [`Fixed`].
struct FixedCompound<C> {
    inner: C,
    digits: usize,
}

impl<C> FixedCompound<C> {
    fn wrap<'a, T: ?Sized>(&self, value: &'a T) -> Fixed<'a, T> {
        Fixed {
            value,
            digits: self.digits,
        }
    }
}

macro_rules! pass {
    ($($name:ident($t:ty)),* $(,)?) => {$(
        fn $name(self, v: $t) -> Result<S::Ok, S::Error> {
            self.inner.$name(v)
        }
    )*};
}

impl<S: Serializer> Serializer for FixedSer<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = FixedCompound<S::SerializeSeq>;
    type SerializeTuple = FixedCompound<S::SerializeTuple>;
    type SerializeTupleStruct = FixedCompound<S::SerializeTupleStruct>;
    type SerializeTupleVariant = FixedCompound<S::SerializeTupleVariant>;
    type SerializeMap = FixedCompound<S::SerializeMap>;
    type SerializeStruct = FixedCompound<S::SerializeStruct>;
    type SerializeStructVariant = FixedCompound<S::SerializeStructVariant>;

    pass!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_f32(self, v: f32) -> Result<S::Ok, S::Error> {
        self.inner.serialize_str(&format!("{v:.*}", self.digits))
    }
    fn serialize_f64(self, v: f64) -> Result<S::Ok, S::Error> {
        self.inner.serialize_str(&format!("{v:.*}", self.digits))
    }
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_none()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        let digits = self.digits;
        self.inner.serialize_some(&Fixed { value, digits })
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit_variant(name, index, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        let digits = self.digits;
        self.inner
            .serialize_newtype_struct(name, &Fixed { value, digits })
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        let digits = self.digits;
        self.inner
            .serialize_newtype_variant(name, index, variant, &Fixed { value, digits })
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        let inner = self.inner.serialize_seq(len)?;
        Ok(FixedCompound {
            inner,
            digits: self.digits,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        let inner = self.inner.serialize_tuple(len)?;
        Ok(FixedCompound {
            inner,
            digits: self.digits,
        })
    }
    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        let inner = self.inner.serialize_tuple_struct(name, len)?;
        Ok(FixedCompound {
            inner,
            digits: self.digits,
        })
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        let inner = self
            .inner
            .serialize_tuple_variant(name, index, variant, len)?;
        Ok(FixedCompound {
            inner,
            digits: self.digits,
        })
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        let inner = self.inner.serialize_map(len)?;
        Ok(FixedCompound {
            inner,
            digits: self.digits,
        })
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        let inner = self.inner.serialize_struct(name, len)?;
        Ok(FixedCompound {
            inner,
            digits: self.digits,
        })
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        let inner = self
            .inner
            .serialize_struct_variant(name, index, variant, len)?;
        Ok(FixedCompound {
            inner,
            digits: self.digits,
        })
    }
    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

impl<C: SerializeSeq> SerializeSeq for FixedCompound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), C::Error> {
        let v = self.wrap(v);
        self.inner.serialize_element(&v)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: SerializeTuple> SerializeTuple for FixedCompound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), C::Error> {
        let v = self.wrap(v);
        self.inner.serialize_element(&v)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: SerializeTupleStruct> SerializeTupleStruct for FixedCompound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), C::Error> {
        let v = self.wrap(v);
        self.inner.serialize_field(&v)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: SerializeTupleVariant> SerializeTupleVariant for FixedCompound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), C::Error> {
        let v = self.wrap(v);
        self.inner.serialize_field(&v)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: SerializeMap> SerializeMap for FixedCompound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), C::Error> {
        let k = self.wrap(k);
        self.inner.serialize_key(&k)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), C::Error> {
        let v = self.wrap(v);
        self.inner.serialize_value(&v)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: SerializeStruct> SerializeStruct for FixedCompound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), C::Error> {
        let v = self.wrap(v);
        self.inner.serialize_field(key, &v)
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: SerializeStructVariant> SerializeStructVariant for FixedCompound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), C::Error> {
        let v = self.wrap(v);
        self.inner.serialize_field(key, &v)
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

/// A `serde_json` formatter that writes finite floats as numbers with
/// `digits` decimals (`serde_json` writes NaN and infinities as `null`
/// before asking it).
#[derive(Clone, Copy)]
pub(crate) struct FixedJson {
    pub(crate) digits: usize,
}

impl serde_json::ser::Formatter for FixedJson {
    fn write_f32<W: Write + ?Sized>(&mut self, w: &mut W, v: f32) -> std::io::Result<()> {
        write!(w, "{v:.*}", self.digits)
    }
    fn write_f64<W: Write + ?Sized>(&mut self, w: &mut W, v: f64) -> std::io::Result<()> {
        write!(w, "{v:.*}", self.digits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_line<T: Serialize>(row: &T, digits: usize) -> String {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        w.serialize(Fixed { value: row, digits }).unwrap();
        String::from_utf8(w.into_inner().unwrap()).unwrap()
    }

    #[derive(serde::Serialize)]
    struct Row {
        url: String,
        mean: f64,
        max: Option<f32>,
        n: u64,
        pair: (f64, i32),
    }

    #[test]
    fn floats_nested_anywhere_get_the_digits_and_nothing_else_changes() {
        let row = Row {
            url: "a,1.5".into(),
            mean: 0.1 + 0.2,
            max: Some(2.5),
            n: 7,
            pair: (-1.0 / 3.0, -4),
        };
        assert_eq!(
            csv_line(&row, 6),
            "\"a,1.5\",0.300000,2.500000,7,-0.333333,-4\n"
        );
        assert_eq!(csv_line(&(1.0005f64, f64::NAN), 3), "1.000,NaN\n");
        assert_eq!(csv_line(&(2.75f64, 0u8), 0), "3,0\n");
        let mut json = Vec::new();
        let mut s = serde_json::Serializer::with_formatter(&mut json, FixedJson { digits: 2 });
        (1.0f64, "x", [0.126f32], f64::INFINITY)
            .serialize(&mut s)
            .unwrap();
        assert_eq!(String::from_utf8(json).unwrap(), "[1.00,\"x\",[0.13],null]");
    }
}
