//! WHATWG URLs for the program's `URL` (js/lazy/url.js): the `url` crate's
//! parser and its quirks module (the WHATWG getters and setters), returned
//! as the components the JS side reads by index.

/// The components a URL object exposes; a component's index in what
/// `op_dsh_url_parse` and `op_dsh_url_set` return is its index here.
pub const URL_PARTS: [&str; 11] =
  ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"];

/// The components `op_dsh_url_set` sets; the setter number is the index
/// here. (`href` is set by parsing again: `op_dsh_url_parse`.)
pub const URL_SETTERS: [&str; 9] =
  ["protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"];

fn url_parts(url: &::url::Url) -> Vec<String> {
  use ::url::quirks;
  URL_PARTS
    .iter()
    .map(|part| match *part {
      "href" => quirks::href(url).to_owned(),
      "origin" => quirks::origin(url),
      "protocol" => quirks::protocol(url).to_owned(),
      "username" => quirks::username(url).to_owned(),
      "password" => quirks::password(url).to_owned(),
      "host" => quirks::host(url).to_owned(),
      "hostname" => quirks::hostname(url).to_owned(),
      "port" => quirks::port(url).to_owned(),
      "pathname" => quirks::pathname(url).to_owned(),
      "search" => quirks::search(url).to_owned(),
      _ => quirks::hash(url).to_owned(),
    })
    .collect()
}

/// `new URL(href, base)`: the URL's components, or `None` when it (or
/// its base) does not parse.
pub fn parse(href: &str, base: Option<&str>) -> Option<Vec<String>> {
  let base = match base {
    Some(base) => Some(::url::Url::parse(base).ok()?),
    None => None,
  };
  let url = ::url::Url::options().base_url(base.as_ref()).parse(href).ok()?;
  Some(url_parts(&url))
}

/// A WHATWG setter (`url.pathname = ...`, setter number `setter` of
/// [`URL_SETTERS`]) applied to `href`: the new components, or `None` when
/// `href` itself does not parse.
pub fn set(href: &str, setter: u32, value: &str) -> Option<Vec<String>> {
  use ::url::quirks;
  let mut url = ::url::Url::parse(href).ok()?;
  // Setters ignore invalid values, as the WHATWG setters do.
  let _ = match *URL_SETTERS.get(setter as usize)? {
    "protocol" => quirks::set_protocol(&mut url, value),
    "username" => quirks::set_username(&mut url, value),
    "password" => quirks::set_password(&mut url, value),
    "host" => quirks::set_host(&mut url, value),
    "hostname" => quirks::set_hostname(&mut url, value),
    "port" => quirks::set_port(&mut url, value),
    "pathname" => {
      quirks::set_pathname(&mut url, value);
      Ok(())
    }
    "search" => {
      quirks::set_search(&mut url, value);
      Ok(())
    }
    _ => {
      quirks::set_hash(&mut url, value);
      Ok(())
    }
  };
  Some(url_parts(&url))
}
