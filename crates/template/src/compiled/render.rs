//! [`Render`]: how a field's value is output by a compiled template, byte for byte as the
//! runtime engine outputs the same value converted with `Value::from_serialize`.

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use galleon_iolist::IoList;

use super::{Out, Writer};
use crate::error::{Error, ErrorKind};
use crate::float::write_float;
use crate::ops::describe;
use crate::value::{Str, Value};

/// A value a compiled template can output with `<%= ... %>` (escaped) or `<%= raw(...) %>`.
///
/// Implemented for integers, floats (printed as Elixir prints them), `bool`, strings (`str`,
/// `String`, `Cow<str>`, [`Str`]), `char`, `Option` (`None` outputs nothing, like `nil`),
/// [`Value`], [`IoList`] and [`Raw`] (safe HTML, never escaped), and through references and
/// smart pointers.
///
/// # Examples
/// ```
/// use galleon_template::compiled::{Out, Raw, Render};
///
/// let mut out = Out::new(256, 0);
/// "Tom & Jerry".render(&mut out).unwrap();
/// 42u8.render(&mut out).unwrap();
/// Raw("<br>").render(&mut out).unwrap();
/// None::<i64>.render(&mut out).unwrap();
/// assert_eq!(out.finish().to_vec(), b"Tom &amp; Jerry42<br>");
/// ```
pub trait Render {
    /// Writes the value HTML-escaped (safe HTML as is).
    fn render(&self, out: &mut Out) -> Result<(), Error>;

    /// Writes the value without escaping (`raw(x)`).
    fn render_raw(&self, out: &mut Out) -> Result<(), Error> {
        self.render(out)
    }

    /// [`Render::render`] through generated code's writer (types written in place override it).
    #[doc(hidden)]
    #[inline(always)]
    fn __write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.with_out(|o| self.render(o))
    }

    /// [`Render::render_raw`] through generated code's writer.
    #[doc(hidden)]
    #[inline(always)]
    fn __write_raw(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.with_out(|o| self.render_raw(o))
    }
}

/// Safe HTML: output as is, never escaped (Phoenix's `{:safe, iodata}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<T>(pub T);

impl<T: AsRef<str>> Render for Raw<T> {
    #[inline]
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        out.copy(self.0.as_ref().as_bytes());
        Ok(())
    }

    #[inline]
    fn __write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.copy_text(self.0.as_ref().as_bytes());
        Ok(())
    }
}

macro_rules! signed {
    ($($t:ty),*) => {$(
        impl Render for $t {
            #[inline(always)]
            fn render(&self, out: &mut Out) -> Result<(), Error> {
                out.int(*self as i64);
                Ok(())
            }

            #[inline(always)]
            fn __write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
                w.int(*self as i64);
                Ok(())
            }
        }
    )*};
}
signed!(i8, i16, i32, i64, isize);

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl Render for $t {
            #[inline(always)]
            fn render(&self, out: &mut Out) -> Result<(), Error> {
                out.uint(*self as u64);
                Ok(())
            }

            #[inline(always)]
            fn __write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
                w.uint(*self as u64);
                Ok(())
            }
        }
    )*};
}
unsigned!(u8, u16, u32, u64, usize);

impl Render for f64 {
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        let mut b = Vec::new();
        write_float(*self, &mut b);
        out.copy(&b);
        Ok(())
    }
}

impl Render for f32 {
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        f64::from(*self).render(out)
    }
}

impl Render for bool {
    #[inline]
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        out.copy(if *self { b"true" } else { b"false" });
        Ok(())
    }
}

impl Render for char {
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        self.encode_utf8(&mut [0; 4]).render(out)
    }

    fn render_raw(&self, out: &mut Out) -> Result<(), Error> {
        self.encode_utf8(&mut [0; 4]).render_raw(out)
    }
}

macro_rules! deref_str {
    ($($t:ty),*) => {$(
        impl Render for $t {
            #[inline]
            fn render(&self, out: &mut Out) -> Result<(), Error> {
                out.escaped(self.as_bytes());
                Ok(())
            }

            #[inline]
            fn render_raw(&self, out: &mut Out) -> Result<(), Error> {
                out.copy(self.as_bytes());
                Ok(())
            }

            #[inline]
            fn __write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
                w.escaped(self.as_bytes());
                Ok(())
            }

            #[inline]
            fn __write_raw(&self, w: &mut Writer<'_>) -> Result<(), Error> {
                w.copy_text(self.as_bytes());
                Ok(())
            }
        }
    )*};
}
deref_str!(str, String, Cow<'_, str>);

impl Render for Str {
    /// Long clean runs are referenced (slices of the shared bytes), not copied.
    #[inline]
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        out.escaped_shared(self.bytes());
        Ok(())
    }

    #[inline]
    fn render_raw(&self, out: &mut Out) -> Result<(), Error> {
        out.shared(self.bytes());
        Ok(())
    }
}

impl Render for IoList {
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        out.append(self);
        Ok(())
    }
}

impl<T: Render> Render for Option<T> {
    #[inline]
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        match self {
            Some(v) => v.render(out),
            None => Ok(()),
        }
    }

    #[inline]
    fn render_raw(&self, out: &mut Out) -> Result<(), Error> {
        match self {
            Some(v) => v.render_raw(out),
            None => Ok(()),
        }
    }

    #[inline]
    fn __write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        match self {
            Some(v) => v.__write(w),
            None => Ok(()),
        }
    }

    #[inline]
    fn __write_raw(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        match self {
            Some(v) => v.__write_raw(w),
            None => Ok(()),
        }
    }
}

macro_rules! deref {
    ($($t:ty),*) => {$(
        impl<T: Render + ?Sized> Render for $t {
            #[inline(always)]
            fn render(&self, out: &mut Out) -> Result<(), Error> {
                (**self).render(out)
            }

            #[inline(always)]
            fn render_raw(&self, out: &mut Out) -> Result<(), Error> {
                (**self).render_raw(out)
            }

            #[inline(always)]
            fn __write(&self, w: &mut Writer<'_>) -> Result<(), Error> {
                (**self).__write(w)
            }

            #[inline(always)]
            fn __write_raw(&self, w: &mut Writer<'_>) -> Result<(), Error> {
                (**self).__write_raw(w)
            }
        }
    )*};
}
deref!(&T, &mut T, Box<T>, Rc<T>, Arc<T>);

impl Render for Value {
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        emit(out, self, true)
    }

    fn render_raw(&self, out: &mut Out) -> Result<(), Error> {
        emit(out, self, false)
    }
}

/// A [`Value`]'s output, as the runtime engine writes it.
fn emit(out: &mut Out, v: &Value, escape: bool) -> Result<(), Error> {
    match v {
        Value::Nil => {}
        Value::Int(i) => out.int(*i),
        Value::Str(s) | Value::Atom(s) if escape => out.escaped_shared(s.bytes()),
        Value::Str(s) | Value::Atom(s) => out.shared(s.bytes()),
        Value::Safe(html) => out.html(html),
        Value::Bool(b) => b.render(out)?,
        Value::Float(x) => x.render(out)?,
        Value::List(items) => {
            for item in items.iter() {
                match item {
                    Value::Int(b @ 0..=255) => {
                        let b = [*b as u8];
                        if escape {
                            out.escaped(&b);
                        } else {
                            out.copy(&b);
                        }
                    }
                    Value::Str(_) | Value::Safe(_) | Value::List(_) => emit(out, item, escape)?,
                    other => {
                        return Err(Error::new(
                            ErrorKind::TypeMismatch,
                            format!(
                                "cannot output a list holding {} (lists output strings, safe HTML and bytes)",
                                describe(other)
                            ),
                        ));
                    }
                }
            }
        }
        Value::Map(_) | Value::Tuple(_) => {
            return Err(Error::new(
                ErrorKind::TypeMismatch,
                format!(
                    "cannot output a {} (iterate it with `for`, or pick an element)",
                    v.type_name()
                ),
            ));
        }
        Value::Regex(_) => {
            return Err(Error::new(
                ErrorKind::TypeMismatch,
                crate::ops::REGEX_OUTPUT,
            ));
        }
    }
    Ok(())
}

impl Render for Bytes {
    /// Bytes output as a string (like a `Str`): long clean runs referenced.
    fn render(&self, out: &mut Out) -> Result<(), Error> {
        out.escaped_shared(self);
        Ok(())
    }

    fn render_raw(&self, out: &mut Out) -> Result<(), Error> {
        out.shared(self);
        Ok(())
    }
}
