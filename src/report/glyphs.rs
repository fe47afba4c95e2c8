//! Correct glyph placement for the PNG.
//!
//! plotters 0.3.7 rasterises `ab_glyph` text without each glyph's left
//! bearing (it adds the pen position to coordinates relative to the glyph's
//! pixel bounds but drops `px_bounds().min.x`), so digits come out unevenly
//! spaced ("1 00"). [`FixedText`] wraps a bitmap backend, passes every
//! drawing call through, and draws text itself with the bearing included.
//! The SVG backend writes `<text>` elements and needs none of this.

use ab_glyph::{Font, FontRef, ScaleFont};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
    FontStyle,
};

/// A backend whose text is drawn with correct glyph spacing.
pub struct FixedText<B> {
    inner: B,
    regular: FontRef<'static>,
    bold: FontRef<'static>,
}

impl<B> FixedText<B> {
    /// Wraps `inner`; text uses the embedded DejaVu Sans.
    pub fn new(inner: B) -> Option<FixedText<B>> {
        Some(FixedText {
            inner,
            regular: FontRef::try_from_slice(dejavu::sans::regular()).ok()?,
            bold: FontRef::try_from_slice(dejavu::sans::bold()).ok()?,
        })
    }
}

/// Calls `draw(x, y, coverage)` for every pixel of `text` at `size`, with
/// the same vertical convention as plotters (y relative to the text box top).
fn rasterise(font: &FontRef<'static>, size: f32, text: &str, mut draw: impl FnMut(i32, i32, f32)) {
    let scaled = font.as_scaled(size);
    let mut pen = 0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            pen += scaled.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(size, ab_glyph::point(pen, 0.0));
        if let Some(outline) = scaled.outline_glyph(glyph) {
            let rect = outline.px_bounds();
            let x0 = rect.min.x as i32;
            let y0 = (size / 2.0 + rect.min.y) as i32;
            outline.draw(|x, y, cov| draw(x0 + x as i32, y0 + y as i32, cov));
        }
        pen += scaled.h_advance(id);
    }
}

impl<B: DrawingBackend> DrawingBackend for FixedText<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        (iw, ih): (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.blit_bitmap(pos, (iw, ih), src)
    }

    /// plotters' own `draw_text`, with [`rasterise`] in place of the font's draw.
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let trans = style.transform();
        let (w, h) = self.inner.get_size();
        let font = match style.style() {
            FontStyle::Bold => self.bold.clone(),
            _ => self.regular.clone(),
        };
        let mut result = Ok(());
        rasterise(&font, style.size() as f32, text, |x, y, cov| {
            if result.is_err() {
                return;
            }
            let (x, y) = trans.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                let c = BackendColor {
                    alpha: color.alpha * cov as f64,
                    rgb: color.rgb,
                };
                result = self.inner.draw_pixel((x, y), c);
            }
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns that hold ink for `text`.
    fn ink_columns(text: &str) -> Vec<i32> {
        let font = FontRef::try_from_slice(dejavu::sans::regular()).unwrap();
        let mut cols = std::collections::BTreeSet::new();
        rasterise(&font, 20.0, text, |x, _, cov| {
            if cov > 0.3 {
                cols.insert(x);
            }
        });
        cols.into_iter().collect()
    }

    #[test]
    fn glyphs_keep_their_bearing() {
        // The '1' of "10" must start right of x=0 by its bearing, and the gap
        // between '1' and '0' must be small (the plotters bug made it large).
        let cols = ink_columns("10");
        assert!(cols[0] > 0, "{cols:?}");
        let gaps: Vec<i32> = cols.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g <= 4), "{cols:?}");
    }
}
