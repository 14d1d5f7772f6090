/** User-facing strings of the unsubscribe footer and the preference pages, by language. English is the fallback. */
export type Strings = {
  footer: string; // contains {link}
  unsubscribeLink: string;
  unsubscribeTitle: string;
  unsubscribeQuestion: string;
  unsubscribeButton: string;
  unsubscribedDone: string;
  subscribeTitle: string;
  subscribeButton: string;
  /** On the page after an unsubscribe, to undo it. */
  resubscribeButton: string;
  subscribedDone: string;
  manageTitle: string;
  manageSubscribed: string;
  manageUnsubscribed: string;
  invalidLink: string;
  /** A link whose signature is not ours: nothing is offered (the project is unknown). */
  brokenLink: string;
  /** A genuine link that no longer works (expired, contact gone, other action): a fresh one by email. */
  expiredTitle: string;
  expiredMessage: string;
  emailLabel: string;
  sendLinkButton: string;
  freshLinkSent: string; // the same answer whether or not the address is a contact
  tooManyRequests: string;
  freshLinkSubject: string; // contains {sender}
  freshLinkIntro: string; // contains {sender}
  freshLinkIgnore: string;
};

const en: Strings = {
  footer: 'You are receiving this email because you subscribed to our updates. {link}',
  unsubscribeLink: 'Unsubscribe',
  unsubscribeTitle: 'Unsubscribe',
  unsubscribeQuestion: 'Stop receiving marketing emails at {email}?',
  unsubscribeButton: 'Unsubscribe',
  unsubscribedDone: '{email} has been unsubscribed.',
  subscribeTitle: 'Subscribe',
  subscribeButton: 'Subscribe',
  resubscribeButton: 'Subscribe again',
  subscribedDone: '{email} is subscribed again.',
  manageTitle: 'Email preferences',
  manageSubscribed: '{email} receives marketing emails.',
  manageUnsubscribed: '{email} does not receive marketing emails.',
  invalidLink: 'This link is invalid or has expired.',
  brokenLink: 'This link is not valid. Check that it was copied in full from the email, or use the link in a more recent email from the sender.',
  expiredTitle: 'This link no longer works',
  expiredMessage: 'Enter your email address and we will send you a fresh link to manage your subscription.',
  emailLabel: 'Email address',
  sendLinkButton: 'Send me a fresh link',
  freshLinkSent: 'If this address receives our emails, a fresh link is on its way. It can take a few minutes to arrive.',
  tooManyRequests: 'Too many requests. Please try again in a few minutes.',
  freshLinkSubject: 'Your link to manage emails from {sender}',
  freshLinkIntro: 'Use this link to unsubscribe from, or manage, the emails you receive from {sender}:',
  freshLinkIgnore: 'If you did not ask for this link, you can ignore this email.',
};

const de: Strings = {
  footer: 'Sie erhalten diese E-Mail, weil Sie unsere Neuigkeiten abonniert haben. {link}',
  unsubscribeLink: 'Abmelden',
  unsubscribeTitle: 'Abmelden',
  unsubscribeQuestion: 'Keine Marketing-E-Mails mehr an {email} senden?',
  unsubscribeButton: 'Abmelden',
  unsubscribedDone: '{email} wurde abgemeldet.',
  subscribeTitle: 'Anmelden',
  subscribeButton: 'Anmelden',
  resubscribeButton: 'Wieder anmelden',
  subscribedDone: '{email} ist wieder angemeldet.',
  manageTitle: 'E-Mail-Einstellungen',
  manageSubscribed: '{email} erhält Marketing-E-Mails.',
  manageUnsubscribed: '{email} erhält keine Marketing-E-Mails.',
  invalidLink: 'Dieser Link ist ungültig oder abgelaufen.',
  brokenLink:
    'Dieser Link ist ungültig. Prüfen Sie, ob er vollständig aus der E-Mail kopiert wurde, oder nutzen Sie den Link einer neueren E-Mail des Absenders.',
  expiredTitle: 'Dieser Link funktioniert nicht mehr',
  expiredMessage: 'Geben Sie Ihre E-Mail-Adresse ein, und wir senden Ihnen einen neuen Link zur Verwaltung Ihres Abonnements.',
  emailLabel: 'E-Mail-Adresse',
  sendLinkButton: 'Neuen Link senden',
  freshLinkSent: 'Wenn diese Adresse unsere E-Mails erhält, ist ein neuer Link unterwegs. Das kann einige Minuten dauern.',
  tooManyRequests: 'Zu viele Anfragen. Bitte versuchen Sie es in einigen Minuten erneut.',
  freshLinkSubject: 'Ihr Link zur Verwaltung der E-Mails von {sender}',
  freshLinkIntro: 'Mit diesem Link können Sie die E-Mails von {sender} abbestellen oder verwalten:',
  freshLinkIgnore: 'Wenn Sie diesen Link nicht angefordert haben, können Sie diese E-Mail ignorieren.',
};

const fr: Strings = {
  footer: 'Vous recevez cet e-mail car vous êtes abonné à nos actualités. {link}',
  unsubscribeLink: 'Se désabonner',
  unsubscribeTitle: 'Se désabonner',
  unsubscribeQuestion: 'Ne plus recevoir d’e-mails marketing à {email} ?',
  unsubscribeButton: 'Se désabonner',
  unsubscribedDone: '{email} a été désabonné.',
  subscribeTitle: 'S’abonner',
  subscribeButton: 'S’abonner',
  resubscribeButton: 'Se réabonner',
  subscribedDone: '{email} est de nouveau abonné.',
  manageTitle: 'Préférences e-mail',
  manageSubscribed: '{email} reçoit les e-mails marketing.',
  manageUnsubscribed: '{email} ne reçoit pas les e-mails marketing.',
  invalidLink: 'Ce lien est invalide ou a expiré.',
  brokenLink: 'Ce lien n’est pas valide. Vérifiez qu’il a été copié en entier depuis l’e-mail, ou utilisez le lien d’un e-mail plus récent de l’expéditeur.',
  expiredTitle: 'Ce lien ne fonctionne plus',
  expiredMessage: 'Saisissez votre adresse e-mail et nous vous enverrons un nouveau lien pour gérer votre abonnement.',
  emailLabel: 'Adresse e-mail',
  sendLinkButton: 'Envoyez-moi un nouveau lien',
  freshLinkSent: 'Si cette adresse reçoit nos e-mails, un nouveau lien est en route. Il peut mettre quelques minutes à arriver.',
  tooManyRequests: 'Trop de demandes. Veuillez réessayer dans quelques minutes.',
  freshLinkSubject: 'Votre lien pour gérer les e-mails de {sender}',
  freshLinkIntro: 'Utilisez ce lien pour vous désabonner des e-mails de {sender} ou les gérer :',
  freshLinkIgnore: 'Si vous n’avez pas demandé ce lien, vous pouvez ignorer cet e-mail.',
};

const es: Strings = {
  footer: 'Recibes este correo porque te suscribiste a nuestras novedades. {link}',
  unsubscribeLink: 'Darse de baja',
  unsubscribeTitle: 'Darse de baja',
  unsubscribeQuestion: '¿Dejar de recibir correos de marketing en {email}?',
  unsubscribeButton: 'Darse de baja',
  unsubscribedDone: '{email} se ha dado de baja.',
  subscribeTitle: 'Suscribirse',
  subscribeButton: 'Suscribirse',
  resubscribeButton: 'Volver a suscribirse',
  subscribedDone: '{email} vuelve a estar suscrito.',
  manageTitle: 'Preferencias de correo',
  manageSubscribed: '{email} recibe correos de marketing.',
  manageUnsubscribed: '{email} no recibe correos de marketing.',
  invalidLink: 'Este enlace no es válido o ha caducado.',
  brokenLink: 'Este enlace no es válido. Comprueba que se copió completo desde el correo o usa el enlace de un correo más reciente del remitente.',
  expiredTitle: 'Este enlace ya no funciona',
  expiredMessage: 'Escribe tu dirección de correo y te enviaremos un enlace nuevo para gestionar tu suscripción.',
  emailLabel: 'Dirección de correo',
  sendLinkButton: 'Enviarme un enlace nuevo',
  freshLinkSent: 'Si esta dirección recibe nuestros correos, un enlace nuevo está en camino. Puede tardar unos minutos en llegar.',
  tooManyRequests: 'Demasiadas solicitudes. Inténtalo de nuevo en unos minutos.',
  freshLinkSubject: 'Tu enlace para gestionar los correos de {sender}',
  freshLinkIntro: 'Usa este enlace para darte de baja de los correos de {sender} o gestionarlos:',
  freshLinkIgnore: 'Si no pediste este enlace, puedes ignorar este correo.',
};

/** A Map, not an object: a contact's locale comes from tracked data, and `constructor` or `__proto__` must not find Object's members. */
const LOCALES = new Map<string, Strings>([
  ['en', en],
  ['de', de],
  ['fr', fr],
  ['es', es],
]);

/** Strings for a locale such as `de`, `de-AT` or `de_AT`; English when unknown. */
export function stringsFor(locale: unknown): Strings {
  if (typeof locale !== 'string') return en;
  return LOCALES.get(locale.toLowerCase().split(/[-_]/)[0]) ?? en;
}

export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The unsubscribe footer appended to MARKETING mail whose body does not place {{unsubscribeUrl}} itself. */
export type UnsubscribeFooter = {
  locale: unknown;
  unsubscribeUrl: string;
  /** The project's name: who sends this mail. */
  sender: string;
  /** The project's postal address setting; its line breaks are kept. */
  postalAddress: string | null;
};

export function unsubscribeFooter(f: UnsubscribeFooter): string {
  const s = stringsFor(f.locale);
  const link = `<a href="${escapeHtml(f.unsubscribeUrl)}">${escapeHtml(s.unsubscribeLink)}</a>`;
  const text = escapeHtml(s.footer).replace('{link}', link);
  const who = [f.sender, f.postalAddress].filter((x): x is string => Boolean(x)).map((x) => escapeHtml(x).replace(/\r?\n/g, '<br>'));
  const identity = who.length > 0 ? `<p style="margin:8px 0 0">${who.join('<br>')}</p>` : '';
  return `<div style="margin-top:32px;font-size:12px;color:#6b7280;text-align:center">${text}${identity}</div>`;
}

/** Inserts `fragment` before </body> when there is one, else appends it. */
export function appendToBody(html: string, fragment: string): string {
  const i = html.search(/<\/body\s*>/i);
  return i === -1 ? html + fragment : html.slice(0, i) + fragment + html.slice(i);
}
